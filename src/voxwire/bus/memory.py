"""An in-process bus for embedded mode.

Each consumer group of a topic has one FIFO queue shared by its members, so a
record goes to one member of each group. Records produced before any group
exists wait in a backlog that the first group takes over. Nothing survives the
process: commits only count what was done.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from voxwire.bus.base import Record
from voxwire.core.errors import BusError


@dataclass
class _Topic:
    groups: dict[str, asyncio.Queue[Record]] = field(default_factory=dict)
    backlog: list[Record] = field(default_factory=list)
    offsets: itertools.count[int] = field(default_factory=itertools.count)


class MemorySubscription:
    def __init__(self, queue: asyncio.Queue[Record]) -> None:
        self._queue = queue
        self._closed = False
        self.committed = -1

    async def next(self) -> Record:
        if self._closed:
            raise BusError("subscription is closed")
        return await self._queue.get()

    async def next_batch(self, max_records: int) -> list[Record]:
        batch = [await self.next()]
        while len(batch) < max_records and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def commit(self, *records: Record) -> None:
        self.committed = max(self.committed, max((r.offset for r in records), default=-1))

    def owns(self, partition: int) -> bool:
        return True

    async def close(self) -> None:
        self._closed = True


class MemoryBus:
    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}
        self._groups: set[str] = set()
        self._closed = False

    def _topic(self, name: str) -> _Topic:
        return self._topics.setdefault(name, _Topic())

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if self._closed:
            raise BusError(f"bus is closed; cannot produce to {topic}")
        state = self._topic(topic)
        record = Record(
            topic=topic, key=key, value=value, offset=next(state.offsets), timestamp=time.time()
        )
        if not state.groups:
            state.backlog.append(record)
        for queue in state.groups.values():
            queue.put_nowait(record)

    def subscribe(self, topic: str, group: str) -> MemorySubscription:
        state = self._topic(topic)
        queue = state.groups.get(group)
        if queue is None:
            queue = state.groups[group] = asyncio.Queue()
            for record in state.backlog:
                queue.put_nowait(record)
            state.backlog.clear()
        self._groups.add(group)
        return MemorySubscription(queue)

    async def has_group(self, group: str) -> bool:
        """Whether a consumer of ``group`` subscribed (the process's groups live as long
        as it does)."""
        return group in self._groups

    async def close(self) -> None:
        self._closed = True
