"""Settings and logging of the Kafka bus's librdkafka clients.

:class:`KafkaOptions` holds what a deployment may tune; :func:`producer_config`
and :func:`consumer_config` turn it into librdkafka properties. librdkafka logs
through ``voxwire.bus.librdkafka``, where :class:`QuietRepeats` lets one copy of
a repeated message through per window (a broker that is down is reported by
every client every few milliseconds).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

_NUMBERS = re.compile(r"\d+")


class QuietRepeats(logging.Filter):
    """Let one copy of a message through per ``window_s``: while a broker is
    down librdkafka reports the failed connect of every client every few
    milliseconds. Messages that differ only in their numbers count as one."""

    def __init__(self, window_s: float = 10.0) -> None:
        super().__init__()
        self._window_s = window_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = _NUMBERS.sub("#", record.getMessage())
        now = time.monotonic()
        if now - self._last.get(key, -math.inf) < self._window_s:
            return False
        if len(self._last) > 1_000:
            self._last.clear()
        self._last[key] = now
        return True


librdkafka_log = logging.getLogger("voxwire.bus.librdkafka")
librdkafka_log.addFilter(QuietRepeats())

ConfigValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """Settings of each subscription's consumer; ``extra`` are raw librdkafka
    properties applied last."""

    session_timeout_ms: int = 10_000
    """A killed consumer's partitions move to the others after this."""
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 1_800_000
    """Backstop: the consumer thread polls on its own (see
    :mod:`voxwire.bus.kafka_consumer`)."""
    prefetch_kbytes: int = 1_024
    """librdkafka's local prefetch per consumer (queued.max.messages.kbytes)."""
    prefetch_messages: int = 100
    """Records prefetched per partition (queued.min.messages)."""
    fetch_backoff_ms: int = 2
    """How soon librdkafka fetches again once the prefetch is consumed; its
    default (1 s) caps a small prefetch at about 1 MiB/s."""
    assignment_strategy: str = "cooperative-sticky"
    """Rebalances move only the partitions that change owner."""
    poll_s: float = 0.1
    """How long one poll waits while a ``next`` call waits for records."""
    keepalive_s: float = 0.5
    """How often the consumer polls while nobody asks for records."""
    rejoin_s: float = 60.0
    """A consumer that lost its partitions (Kafka was away longer than the session
    timeout) and has not got any back this long after is replaced by a new one."""
    idle_s: float = 60.0
    """A consumer asked for records that gets none for this long, while its
    partitions have records waiting (the broker's end offsets past its positions),
    is replaced by a new one: a fetcher that stopped without an error."""
    stall_s: float = 60.0
    """A consumer thread that has not come round its loop for this long (it does
    every ``keepalive_s``) is stuck: logged with its stack, and ``/healthz`` says so."""
    commit_timeout_s: float = 30.0
    """A commit the broker has not answered within this fails its callers (and
    is retried): librdkafka holds a commit while the group has no coordinator,
    and a caller must not wait on that for ever."""
    extra: Mapping[str, ConfigValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    """Client settings: the producer's here, the consumers' in ``consumer``;
    override with ``dataclasses.replace``. ``producer_extra`` are raw
    librdkafka properties applied last."""

    linger_ms: float = 0.0
    """Producer batching delay: none, since most callers await each record
    (records still batch while earlier requests are in flight)."""
    delivery_timeout_ms: int = 120_000
    """A record not accepted within this fails its ``produce`` (rides out a
    broker restart)."""
    producer_queue_kbytes: int = 65_536
    """Local producer queue bound; ``produce`` waits when it is full."""
    close_timeout_s: float = 30.0
    """How long ``close`` waits for undelivered records (and a consumer for
    its last commit)."""
    producer_extra: Mapping[str, ConfigValue] = field(default_factory=dict)
    consumer: ConsumerOptions = field(default_factory=ConsumerOptions)


def producer_config(bootstrap: str, client_id: str, options: KafkaOptions) -> dict[str, Any]:
    """The librdkafka configuration of the bus's producer."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": options.linger_ms,
        "message.timeout.ms": options.delivery_timeout_ms,
        "queue.buffering.max.kbytes": options.producer_queue_kbytes,
        # the Java client's partitioner: a key lands on the same partition
        # whichever client (Java, librdkafka) produced it
        "partitioner": "murmur2_random",
        "log.connection.close": False,
        "logger": librdkafka_log,
        **options.producer_extra,
    }


def consumer_config(
    bootstrap: str, client_id: str, group: str, options: KafkaOptions
) -> dict[str, Any]:
    """The librdkafka configuration of one subscription's consumer."""
    consumer = options.consumer
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": consumer.session_timeout_ms,
        "heartbeat.interval.ms": consumer.heartbeat_interval_ms,
        "max.poll.interval.ms": consumer.max_poll_interval_ms,
        "partition.assignment.strategy": consumer.assignment_strategy,
        "queued.max.messages.kbytes": consumer.prefetch_kbytes,
        "queued.min.messages": consumer.prefetch_messages,
        "fetch.queue.backoff.ms": consumer.fetch_backoff_ms,
        "log.connection.close": False,
        "logger": librdkafka_log,
        **consumer.extra,
    }


def kafka_error(exc: KafkaException) -> KafkaError | None:
    """The KafkaError inside ``exc``, if it carries one."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None
