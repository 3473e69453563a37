"""The commits of one Kafka consumer: positions to commit, requests awaiting
their report, and the callers waiting on them.

Its consumer thread owns a :class:`Commits`: records are ``started`` when
fetched and ``finish``-ed when their work is done; the positions that advanced
are taken (:meth:`Commits.take_due`) and sent as one asynchronous commit, whose
report (:meth:`Commits.report`) settles the callers. A request not answered
within ``timeout_s`` fails its callers and is sent again, so no caller waits on
a broker for ever. :func:`settle` answers an asyncio future from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from voxwire.bus.base import Record
from voxwire.bus.offsets import OffsetTracker
from voxwire.core.errors import BusError

log = logging.getLogger(__name__)

T = TypeVar("T")

COMMIT_POLL_S = 0.002
"""How often a consumer thread polls for commit reports while idle."""

_RETRY_S = 1.0  # a failed commit is sent again this long after


def settle(future: asyncio.Future[T], result: T | BaseException) -> None:
    """Settle ``future`` from any thread (no-op once it is done)."""

    def settle_now() -> None:
        if future.done():
            return
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)

    # a closed loop raises RuntimeError: nobody is waiting any more
    with contextlib.suppress(RuntimeError):
        future.get_loop().call_soon_threadsafe(settle_now)


@dataclass(slots=True)
class _Commit:
    """A commit request sent and not yet reported on."""

    positions: dict[int, int]
    waiters: list[asyncio.Future[None]]
    deadline: float


class Commits:
    """What one consumer of ``topic`` has to commit and who waits for it
    (used by its consumer thread only)."""

    def __init__(self, topic: str, *, timeout_s: float) -> None:
        self.topic = topic
        self._timeout_s = timeout_s
        self._tracker = OffsetTracker()
        self._dirty: dict[int, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._committing: deque[_Commit] = deque()
        self._retry_at = 0.0

    @property
    def awaited(self) -> bool:
        """Whether a commit request awaits its report."""
        return bool(self._committing)

    def wake_at(self, keepalive_at: float) -> float:
        """When the thread must look again (``keepalive_at`` at the latest)."""
        wake = keepalive_at
        if self._dirty:
            wake = min(wake, self._retry_at)
        if self._committing:
            wake = min(wake, time.monotonic() + COMMIT_POLL_S)
        return wake

    def started(self, record: Record) -> None:
        self._tracker.started(record.partition, record.offset)

    def finish(self, records: Iterable[Record], future: asyncio.Future[None]) -> None:
        """``records`` are done: ``future`` is settled once positions covering
        them are committed (at once when none advanced)."""
        advanced = False
        for record in records:
            position = self._tracker.finished(record.partition, record.offset)
            if position is not None:
                self._dirty[record.partition] = position
                advanced = True
        if advanced:
            self._waiters.append(future)
        else:
            settle(future, None)

    def take_due(self, *, force: bool) -> tuple[list[TopicPartition], _Commit] | None:
        """The positions that advanced, as one request to send (None: nothing
        to send, or a failed commit waits for its retry)."""
        if not self._dirty or (not force and time.monotonic() < self._retry_at):
            return None
        positions, self._dirty = self._dirty, {}
        waiters, self._waiters = self._waiters, []
        offsets = [TopicPartition(self.topic, p, pos) for p, pos in positions.items()]
        return offsets, _Commit(positions, waiters, time.monotonic() + self._timeout_s)

    def sent(self, commit: _Commit) -> None:
        self._committing.append(commit)

    def report(
        self,
        error: KafkaError | None,
        partitions: list[TopicPartition] | None,
        assignment: frozenset[int],
    ) -> None:
        """librdkafka's report on a commit (called inside poll, on the thread).

        Reports come in the order of the requests; one that names no offsets
        (nothing left to commit) belongs to the oldest request. A report for a
        request that already timed out matches nothing and is dropped.
        """
        partitions = partitions or []
        committed = {tp.partition: tp.offset for tp in partitions}
        entry = next((c for c in self._committing if c.positions == committed), None)
        if entry is None and not committed and self._committing:
            entry = self._committing[0]
        if entry is None:
            log.debug("%s: a report on a commit no longer awaited: %s", self.topic, error)
            return
        self._committing.remove(entry)
        error = error or next((tp.error for tp in partitions if tp.error is not None), None)
        if error is None:
            for future in entry.waiters:
                settle(future, None)
        else:
            self.failed(entry, error, assignment)

    def expire(self, assignment: frozenset[int]) -> None:
        """Fail the commits the broker has not answered in time (they are retried)."""
        now = time.monotonic()
        while self._committing and self._committing[0].deadline <= now:
            entry = self._committing.popleft()
            reason = f"no answer within {self._timeout_s:g} s"
            self.failed(entry, reason, assignment)

    def failed(
        self,
        commit: _Commit,
        error: KafkaError | KafkaException | str,
        assignment: frozenset[int],
    ) -> None:
        """Fail the callers of ``commit``; its positions are sent again later."""
        for partition, position in commit.positions.items():
            if partition in assignment:  # a newer position already covers it
                self._dirty.setdefault(partition, position)
        self._retry_at = time.monotonic() + _RETRY_S
        log.warning("commit on %s failed (will retry): %s", self.topic, error)
        failure = BusError(
            f"commit on {self.topic} failed: {error}; the record may be delivered again"
        )
        for future in commit.waiters:
            settle(future, failure)

    def forget(self, partitions: set[int]) -> int:
        """Forget revoked ``partitions``; how many of their records were in flight."""
        in_flight = sum(self._tracker.in_flight(p) for p in partitions)
        self._tracker.revoke(partitions)
        for partition in partitions:
            self._dirty.pop(partition, None)
        return in_flight

    def fail_all(self, error: BusError) -> None:
        """Fail every caller still waiting (the consumer is gone)."""
        for future in self._waiters + [f for c in self._committing for f in c.waiters]:
            settle(future, error)
