"""Results relay: bus -> store -> MQTT, at least once, in order per session.

Records of ``transcription.results`` are taken in batches: the batch is stored
in one transaction (idempotent by ``sid``/``seq``), every message is published
retained with QoS 1 on its session topic over one MQTT connection (so the
broker sees them in order), and once the broker has acknowledged all of them
the batch is committed. Acknowledgements and commits are awaited in the
background while the next batches are stored and sent (at most
``_BATCHES_IN_FLIGHT``): batches are committed in order, never past one the
broker refused (that error ends the relay, and the batch is delivered again);
a commit that fails is retried by a later one or, at worst, the batch is
delivered again and its repeats are skipped by seq.
Metrics: messages relayed by type, error messages by code, each message's
delivery latency (its server timestamp to the broker's acknowledgement) and,
for live finals, their latency from the end of their audio.
The results of a deleted session are dropped, neither stored nor published
(:mod:`voxwire.sessions.deletion`).
Storing first means a client that sees ``seq`` N can always fetch everything
up to N from the history API. The batch size bounds
the work in flight: a slow broker slows the relay instead of growing a queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Collection, Sequence
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import Bus, Record, Subscription, commit_or_warn
from voxwire.core.metrics import DELIVERY_SECONDS, ERRORS, FINAL_SECONDS, RELAYED
from voxwire.wire.topics import RESULTS_TOPIC
from voxwire_client.messages import (
    ErrorMessage,
    Message,
    SegmentMessage,
    encode_message,
    parse_message,
    topic_kind,
)
from voxwire_client.topics import session_topic

log = logging.getLogger(__name__)

RELAY_GROUP = "voxwire-relay"
_BATCHES_IN_FLIGHT = 16


class Publisher(Protocol):
    def send_many(
        self,
        messages: Sequence[tuple[str, bytes]],
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
    ) -> asyncio.Future[None]: ...


class MessageSink(Protocol):
    """Where messages are recorded before they are published (the store)."""

    async def record_messages(self, messages: list[Message]) -> int: ...

    async def deleted_among(self, sids: Collection[str]) -> set[str]: ...


class ResultRelay:
    def __init__(
        self,
        bus: Bus,
        store: MessageSink,
        publisher: Publisher,
        *,
        expiry_s: int,
        batch_size: int = 500,
        group: str = RELAY_GROUP,
    ) -> None:
        self._bus = bus
        self._store = store
        self._publisher = publisher
        self._expiry_s = expiry_s
        self._batch_size = batch_size
        self._group = group
        self.relayed = 0

    async def run(self) -> None:
        subscription = self._bus.subscribe(RESULTS_TOPIC, self._group)
        in_flight: deque[asyncio.Task[None]] = deque()
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
                messages = await self._of_live_sessions(messages)
                acked = await self._store_and_send(messages)
                self.relayed += len(messages)
                previous = in_flight[-1] if in_flight else None
                in_flight.append(
                    asyncio.create_task(_settle(subscription, records, acked, previous))
                )
                while len(in_flight) > _BATCHES_IN_FLIGHT or (in_flight and in_flight[0].done()):
                    await in_flight.popleft()  # raises when the broker refused a batch
        finally:
            await asyncio.gather(*in_flight, return_exceptions=True)
            await subscription.close()

    async def _of_live_sessions(self, messages: list[Message]) -> list[Message]:
        """``messages`` less those of deleted sessions (what a worker emitted after
        the deletion): neither stored nor published."""
        if messages and (deleted := await self._store.deleted_among({m.sid for m in messages})):
            log.info("relay: dropped the results of %d deleted sessions", len(deleted))
            return [m for m in messages if m.sid not in deleted]
        return messages

    async def _store_and_send(self, messages: list[Message]) -> asyncio.Future[None] | None:
        """Store the batch, then queue its publishes."""
        if not messages:
            return None
        await self._store.record_messages(messages)
        acked = self._publisher.send_many(
            [(session_topic(m.sid, topic_kind(m)), encode_message(m)) for m in messages],
            qos=1,
            retain=True,
            expiry_s=self._expiry_s,
        )
        acked.add_done_callback(lambda done: _delivered(messages, done))
        return acked


def _delivered(messages: list[Message], acked: asyncio.Future[None]) -> None:
    """Count a batch the broker acknowledged, and how long its messages took."""
    if acked.cancelled() or acked.exception() is not None:
        return
    now = time.time()
    for message in messages:
        RELAYED.labels(type=message.type).inc()
        DELIVERY_SECONDS.observe(max(0.0, now - message.ts.timestamp()))
        if isinstance(message, ErrorMessage):
            ERRORS.labels(code=message.code).inc()
        elif isinstance(message, SegmentMessage) and message.type == "final" and message.latency:
            latency = message.latency
            FINAL_SECONDS.observe(
                (latency.vad_ms + latency.queue_ms + latency.transcribe_ms) / 1000
            )


async def _settle(
    subscription: Subscription,
    records: list[Record],
    acked: asyncio.Future[None] | None,
    previous: asyncio.Task[None] | None,
) -> None:
    """Commit a batch once the broker acknowledged it and every batch before it."""
    if acked is not None:
        await acked
    if previous is not None:
        await previous  # a batch that failed stops the commits of those after it
    await commit_or_warn(subscription, records)
