"""Results relay: bus -> store -> MQTT, at least once, in order per session.

For each record of ``transcription.results``: store the message (idempotent by
``sid``/``seq``), publish it retained with QoS 1 on its session topic, wait for
the broker's acknowledgement, then commit. Storing first means a client that
sees ``seq`` N can always fetch everything up to N from the history API.
"""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import RESULTS_TOPIC, Bus
from voxwire.store import Store
from voxwire_client.messages import encode_message, parse_message, topic_kind
from voxwire_client.topics import session_topic

log = logging.getLogger(__name__)

RELAY_GROUP = "voxwire-relay"


class Publisher(Protocol):
    async def publish_async(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
    ) -> None: ...


class ResultRelay:
    def __init__(self, bus: Bus, store: Store, publisher: Publisher, *, expiry_s: int) -> None:
        self._bus = bus
        self._store = store
        self._publisher = publisher
        self._expiry_s = expiry_s
        self.relayed = 0

    async def run(self) -> None:
        subscription = self._bus.subscribe(RESULTS_TOPIC, RELAY_GROUP)
        try:
            while True:
                record = await subscription.next()
                try:
                    message = parse_message(record.value)
                except ValidationError:
                    log.error(
                        "dropping a malformed result record (key %s, offset %d)",
                        record.key,
                        record.offset,
                    )
                    await subscription.commit(record)
                    continue
                await self._store.record_message(message)
                await self._publisher.publish_async(
                    session_topic(message.sid, topic_kind(message)),
                    encode_message(message),
                    qos=1,
                    retain=True,
                    expiry_s=self._expiry_s,
                )
                await subscription.commit(record)
                self.relayed += 1
        finally:
            await subscription.close()
