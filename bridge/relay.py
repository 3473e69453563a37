"""Results relay: bus -> store -> MQTT, at least once, in order per session.

Records of ``transcription.results`` are taken in batches: the batch is stored
in one transaction (idempotent by ``sid``/``seq``), every message is published
retained with QoS 1 on its session topic over one MQTT connection (so the
broker sees them in order), and once the broker has acknowledged all of them
the batch is committed. Storing first means a client that sees ``seq`` N can
always fetch everything up to N from the history API. The batch size bounds
the work in flight: a slow broker slows the relay instead of growing a queue.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import RESULTS_TOPIC, Bus
from voxwire_client.messages import Message, encode_message, parse_message, topic_kind
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


class MessageSink(Protocol):
    """Where messages are recorded before they are published (the store)."""

    async def record_messages(self, messages: list[Message]) -> int: ...


class MessageObserver(Protocol):
    """Told about every relayed batch after it was stored (hot state)."""

    async def apply_many(self, messages: list[Message]) -> None: ...


class ResultRelay:
    def __init__(
        self,
        bus: Bus,
        store: MessageSink,
        publisher: Publisher,
        *,
        expiry_s: int,
        batch_size: int = 500,
        observers: tuple[MessageObserver, ...] = (),
        group: str = RELAY_GROUP,
    ) -> None:
        self._bus = bus
        self._store = store
        self._publisher = publisher
        self._expiry_s = expiry_s
        self._batch_size = batch_size
        self._observers = observers
        self._group = group
        self.relayed = 0

    async def run(self) -> None:
        subscription = self._bus.subscribe(RESULTS_TOPIC, self._group)
        try:
            while True:
                records = await subscription.next_batch(self._batch_size)
                messages = []
                for record in records:
                    try:
                        messages.append(parse_message(record.value))
                    except ValidationError:
                        log.error(
                            "dropping a malformed result record (key %s, offset %d)",
                            record.key,
                            record.offset,
                        )
                await self._relay(messages)
                await asyncio.gather(*(subscription.commit(record) for record in records))
                self.relayed += len(messages)
        finally:
            await subscription.close()

    async def _relay(self, messages: list[Message]) -> None:
        if not messages:
            return
        await self._store.record_messages(messages)
        for observer in self._observers:
            await observer.apply_many(messages)
        await asyncio.gather(
            *(
                self._publisher.publish_async(
                    session_topic(m.sid, topic_kind(m)),
                    encode_message(m),
                    qos=1,
                    retain=True,
                    expiry_s=self._expiry_s,
                )
                for m in messages
            )
        )
