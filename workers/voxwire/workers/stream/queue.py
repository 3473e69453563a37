"""A live session's queue of work, between its intake and the scheduler.

:class:`WorkQueue` holds the items a session's
:class:`~voxwire.workers.stream.intake.StreamIntake` made due (and a
:class:`ReplayWork` on resuming) until a scheduler takes them. A partial or
final drops the queued partials of its segment, on its channel (a newer text will come);
finals are never dropped. :data:`RANK` orders the kinds of work by urgency,
for a scheduler that serves many sessions with one engine. Its methods are
safe from any thread (one lock of its own).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from voxwire.core.metrics import STREAM_PARTIALS
from voxwire.workers.stream.intake import (
    FinalWork,
    IntakeWork,
    LikelyFinalWork,
    PartialWork,
    ProgressWork,
)
from voxwire_client.messages import Message


@dataclass(frozen=True, slots=True)
class ReplayWork:
    """Emit messages decided before the stream was resumed here, as they are."""

    messages: tuple[Message, ...]
    decided_at: float


Work = IntakeWork | ReplayWork


@dataclass(slots=True)
class PartialTally:
    """What became of a session's partials beyond those sent."""

    preempted: int = 0
    """Stopped because a final needed the engine."""
    late: int = 0
    """Finished after their segment's final or a newer partial, and dropped."""
    shown: tuple[int, int] = (-1, -1)
    """(start_ms, end_ms) of the last partial sent."""


RANK: dict[type, int] = {
    ReplayWork: 0, ProgressWork: 0, FinalWork: 1, LikelyFinalWork: 2, PartialWork: 3,
}  # fmt: skip
"""How urgent each kind of work is, lower first."""


class WorkQueue:
    """A session's queued work and the item being run; safe from any thread."""

    def __init__(self, on_queued: Callable[[int], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: deque[Work] = deque()
        self._in_flight: list[Work] = []  # a partial, and what its session's final brought
        self._on_queued = on_queued
        self.closed = False
        self.skipped_partials = 0

    def put(self, work: Work) -> None:
        """Queue ``work``; a partial or final drops the queued partials of its segment."""
        with self._lock:
            if self.closed:
                return
            if isinstance(work, PartialWork | FinalWork):
                start, track = work.start_ms, work.track
                stale = [
                    w
                    for w in self._items
                    if isinstance(w, PartialWork) and (w.start_ms, w.track) == (start, track)
                ]
                for old in stale:
                    self._items.remove(old)
                self.skipped_partials += len(stale)
                STREAM_PARTIALS.labels("superseded").inc(len(stale))
            self._items.append(work)
        if self._on_queued is not None:
            self._on_queued(RANK[type(work)])

    def take(self, wanted: Callable[[Work], bool] = lambda work: True) -> Work | None:
        """Pop the next item when it is ``wanted``; it is in flight until :meth:`done`."""
        with self._lock:
            if not self._items or not wanted(self._items[0]):
                return None
            work = self._items.popleft()
            self._in_flight.append(work)
        return work

    def done(self, work: Work) -> None:
        """``work`` is no longer in flight."""
        with self._lock:
            if work in self._in_flight:
                self._in_flight.remove(work)

    def next(self) -> Work | None:
        with self._lock:
            return self._items[0] if self._items else None

    def oldest(self) -> Work | None:
        """The oldest item in flight or queued."""
        with self._lock:
            pending = [*self._in_flight, *([self._items[0]] if self._items else [])]
        return min(pending, key=lambda work: work.decided_at, default=None)

    def close(self) -> None:
        """Drop the queued work and refuse more."""
        with self._lock:
            self.closed = True
            self._items.clear()
