"""Safe commit positions for records that finish out of order (no I/O).

A Kafka consumer commits one position per partition: "everything below this
offset is done". Workers run several jobs of one partition at once, so jobs
finish out of order; committing the offset after a later job must not mark an
earlier, still running job done, or a crash would lose it.
:class:`OffsetTracker` is told when a record is handed out (``started``) and
when its work is done (``finished``) and answers with the position that may be
committed: the lowest offset still in flight, or one past the highest finished
offset when nothing is in flight.

Offsets within a partition need not be contiguous (compaction, transaction
markers): only offsets that were started count. When a partition is revoked
(a rebalance gave it to another consumer) its state is forgotten, and records
of it that finish later are not committed; the new owner redelivers them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class _Partition:
    committed: int
    """The last position returned (or the first offset started: nothing below
    it was ever ours to commit)."""
    pending: set[int] = field(default_factory=set)
    """Offsets started and not finished."""
    heap: list[int] = field(default_factory=list)
    """Started offsets, smallest first; finished ones are removed lazily."""
    highest_finished: int = -1


class OffsetTracker:
    """Commit positions per partition for one topic of one consumer."""

    def __init__(self) -> None:
        self._partitions: dict[int, _Partition] = {}

    def started(self, partition: int, offset: int) -> None:
        """``offset`` of ``partition`` was handed out for processing."""
        state = self._partitions.get(partition)
        if state is None:
            state = self._partitions[partition] = _Partition(committed=offset)
        if offset not in state.pending:
            state.pending.add(offset)
            heapq.heappush(state.heap, offset)

    def finished(self, partition: int, offset: int) -> int | None:
        """``offset`` is done; return the new commit position of ``partition``,
        or None when it does not advance (an earlier record is still in flight,
        the record is unknown, or its partition was revoked)."""
        state = self._partitions.get(partition)
        if state is None or offset not in state.pending:
            return None
        state.pending.discard(offset)
        state.highest_finished = max(state.highest_finished, offset)
        while state.heap and state.heap[0] not in state.pending:
            heapq.heappop(state.heap)
        position = state.heap[0] if state.heap else state.highest_finished + 1
        if position <= state.committed:
            return None
        state.committed = position
        return position

    def revoke(self, partitions: Iterable[int]) -> None:
        """Forget ``partitions``: they now belong to another consumer."""
        for partition in partitions:
            self._partitions.pop(partition, None)

    def in_flight(self, partition: int) -> int:
        """How many records of ``partition`` are started and not finished."""
        state = self._partitions.get(partition)
        return len(state.pending) if state else 0

    def position(self, partition: int) -> int | None:
        """The last commit position returned for ``partition`` (or the first
        offset started there), None for a partition not tracked."""
        state = self._partitions.get(partition)
        return state.committed if state else None
