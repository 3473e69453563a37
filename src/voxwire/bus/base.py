"""The bus interface."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from voxwire.core.errors import BusError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a topic. ``offset`` counts within ``partition`` (the
    in-process bus has one partition per topic, 0); ``timestamp``: when the bus
    took it, seconds since the epoch (None: unknown)."""

    topic: str
    key: str
    value: bytes
    offset: int
    partition: int = 0
    timestamp: float | None = None


class Subscription(Protocol):
    """One consumer in a consumer group."""

    async def next(self) -> Record:
        """Wait for the next record of the topic for this group."""
        ...

    async def next_batch(self, max_records: int) -> list[Record]:
        """Wait for at least one record; return it with those already waiting
        behind it, up to ``max_records``, in order."""
        ...

    async def commit(self, *records: Record) -> None:
        """Mark ``records`` done: they will not be delivered to the group again."""
        ...

    def owns(self, partition: int) -> bool:
        """Whether this consumer still owns ``partition`` (a rebalance may move it)."""
        ...

    async def close(self) -> None: ...


async def commit_or_warn(subscription: Subscription, records: list[Record]) -> None:
    """Commit ``records``; a refused commit is only logged: a later commit covers
    them, or they are delivered again and their repeats are skipped downstream."""
    if not records:
        return
    try:
        await subscription.commit(*records)
    except BusError as exc:
        log.warning("%s", exc)


class Bus(Protocol):
    async def produce(self, topic: str, key: str, value: bytes) -> None:
        """Return once the bus has accepted the record (durably, where it can)."""
        ...

    def subscribe(self, topic: str, group: str) -> Subscription:
        """Join ``group`` on ``topic``; records are shared among its members,
        in order per key."""
        ...

    async def has_group(self, group: str) -> bool:
        """Whether ``group`` exists: a consumer of it runs, or ran and its group is
        kept (Kafka keeps a group with committed positions while its members
        restart)."""
        ...

    async def close(self) -> None: ...
