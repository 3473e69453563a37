"""Consumer lag from librdkafka's statistics.

With ``statistics.interval.ms`` set, librdkafka hands each consumer a JSON
document of its state every interval (inside ``poll``, on the consumer's
thread). :func:`consumer_lag` reads the lag of the partitions the consumer
owns from it; :class:`LagGauge` sets ``voxwire_kafka_consumer_lag`` from each
document. Pure parsing: no I/O here.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from voxwire.core.metrics import CONSUMER_LAG

log = logging.getLogger(__name__)

STATS_INTERVAL_MS = 5_000
"""How often librdkafka reports a consumer's state (and so its lag)."""


def consumer_lag(stats: dict[str, Any]) -> dict[str, int]:
    """Lag per topic: the records between the consumer's position and the end of
    each partition it owns, summed (partitions whose lag is unknown yet count 0)."""
    lag: dict[str, int] = {}
    for topic, info in (stats.get("topics") or {}).items():
        total = 0
        for partition, state in (info.get("partitions") or {}).items():
            if partition == "-1" or not state.get("fetch_state") or state["fetch_state"] == "none":
                continue  # the internal "unassigned" partition, or one not fetched here
            total += max(0, int(state.get("consumer_lag", -1)))
        lag[topic] = total
    return lag


class LagGauge:
    """librdkafka's ``stats_cb`` for one consumer of ``group``."""

    def __init__(self, group: str) -> None:
        self._group = group

    def __call__(self, document: str) -> None:
        try:
            lags = consumer_lag(json.loads(document))
        except (ValueError, TypeError, AttributeError) as exc:
            log.debug("unreadable librdkafka statistics: %s", exc)
            return
        for topic, lag in lags.items():
            CONSUMER_LAG.labels(topic=topic, group=self._group).set(lag)
