"""The one place that runs the engine for live streams.

:class:`Scheduler` takes work from :class:`~voxwire.workers.stream_pipeline.StreamSession`
queues, calls the engine where the work needs it, and commits the outcome
through :meth:`StreamSession.commit <voxwire.workers.stream_pipeline.StreamSession.commit>`
(the one path that turns work into messages). It serves one session
(:meth:`Scheduler.run_pending`, :meth:`Scheduler.finish`) or every live
session of a worker (:meth:`Scheduler.drain`, over one :class:`LiveSession`
record per session), one item at a time, on one thread:

- the most urgent kind first (progress, finals, likely finals, partials:
  :data:`~voxwire.workers.stream_queue.RANK`); within a kind, the session
  served longest ago, so a session with a backlog (audio sent faster than
  real time) takes turns with the others instead of going before them;
- a final or likely final queued while a partial is being transcribed
  preempts the partial (:meth:`Scheduler.queued`; the partial is dropped);
- with ``batch_finals`` above 1 and an engine that can
  (:class:`~voxwire.workers.engine.BatchEngine`), the finals waiting in
  several sessions (same engine options) share one engine call.

Errors the ingestion thread found (:meth:`Scheduler.report`) are emitted on
the scheduler's thread, since emitting waits on the bus.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from voxwire.bus import Record
from voxwire.core.errors import BusError, VoxwireError
from voxwire.workers.engine import BatchEngine, Engine, Segment
from voxwire.workers.stream_checkpoints import CheckpointError
from voxwire.workers.stream_intake import FinalWork, PartialWork
from voxwire.workers.stream_pipeline import Outcome, StreamSession
from voxwire.workers.stream_queue import RANK

log = logging.getLogger(__name__)

_IDLE = 99  # the running rank when nothing runs
_FINAL_RANK = RANK[FinalWork]  # finals only: those of several sessions can share an engine call
_FINAL_RANKS = (_FINAL_RANK, _FINAL_RANK + 1)  # finals and likely finals
_PARTIAL_RANK = RANK[PartialWork]


class SessionMoved(Exception):
    """The session's partition went to another worker: emit nothing more."""


@dataclass(eq=False)
class LiveSession:
    """What a worker keeps of one live session."""

    session: StreamSession
    start: bytes
    """The session's start record, saved with each checkpoint."""
    partition: int
    """The audio partition the session's records come from."""
    held: list[tuple[int, Record]] = field(default_factory=list)
    """Records not committed yet, with the chunk each is held for (the start: -1)."""
    settled: int | None = None
    """The resume chunk of the last checkpoint saved: records before it are free."""
    served: float = 0.0
    """When the scheduler last began an item of the session."""
    ending: bool = False
    """The end arrived: later records are ignored, the transcript is due."""


@dataclass
class Drained:
    """Sessions a :meth:`Scheduler.drain` left: finished, or moved to another worker."""

    finished: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    def settled(self, sid: str) -> bool:
        return sid in self.finished or sid in self.moved


class Scheduler:
    """Runs the engine on the sessions' work; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        *,
        now: Callable[[], float] = time.monotonic,
        batch_finals: int = 1,
        preempted: Callable[[], bool] | None = None,
    ) -> None:
        """``preempted`` replaces the scheduler's own preemption signal (polled
        while a partial is transcribed: True drops the partial)."""
        self._engine = engine
        self._now = now
        self._batch = batch_finals if isinstance(engine, BatchEngine) else 1
        self.batches: list[int] = []  # the size of each batched call, for tests and benchmarks
        self._preempt = threading.Event()
        self._preempted = preempted or self._preempt.is_set
        self._running_rank = _IDLE  # of the item being run
        self._errors: list[tuple[StreamSession, VoxwireError]] = []
        self._errors_lock = threading.Lock()

    def queued(self, rank: int) -> None:
        """A session queued work of ``rank`` (any thread): a final or likely final
        preempts a partial (not a likely final: its final would reuse its text)."""
        if rank in _FINAL_RANKS and self._running_rank == _PARTIAL_RANK:
            self._preempt.set()

    def report(self, session: StreamSession, exc: VoxwireError) -> None:
        """An error found while ingesting (any thread), emitted by the next drain."""
        with self._errors_lock:
            self._errors.append((session, exc))

    # --- one session ----------------------------------------------------------------------------

    def run_next(self, session: StreamSession) -> bool:
        """Run the session's next item; False when none is queued."""
        work = session.take()
        if work is None:
            return False
        started = self._now()
        outcome: Outcome = None
        if session.needs_engine(work):
            assert isinstance(work, PartialWork | FinalWork)
            abort = self._preempted if isinstance(work, PartialWork) else None
            try:
                outcome = self._engine.transcribe(work.audio, session.options, abort=abort)
            except Exception as exc:
                outcome = exc
        session.commit(work, outcome, started)
        return True

    def run_pending(self, session: StreamSession) -> int:
        """Run the session's queued work in order, until the queue is empty
        (work queued meanwhile included). Returns how many items were done."""
        done = 0
        while self.run_next(session):
            done += 1
        return done

    def finish(self, session: StreamSession) -> None:
        """After the session's end: run what is left, then emit its transcript
        and ``completed`` (nothing after a fatal error). Once only."""
        if session.ended:
            self.run_pending(session)
        session.finish()

    # --- every session of a worker --------------------------------------------------------------

    def drain(self, live: Mapping[str, LiveSession]) -> Drained:
        """Run what the sessions have queued, the most urgent item of any session
        first; finish the sessions whose end came. A session whose ``emit``
        raises :class:`SessionMoved` is left alone from then on."""
        out = Drained()
        self._report_errors(out)
        while True:
            self._running_rank = _IDLE
            self._preempt.clear()
            records = dict(live)  # the event loop may open and forget sessions meanwhile
            ranked = [
                (rank[0], record.served, rank[1], sid)
                for sid, record in records.items()
                if not out.settled(sid) and (rank := record.session.next_rank()) is not None
            ]
            if not ranked:
                break
            self._running_rank, _, _, sid = min(ranked)
            records[sid].served = self._now()
            if self._running_rank == _FINAL_RANK and self._batch > 1:
                others = [r[3] for r in sorted(ranked) if r[0] == _FINAL_RANK and r[3] != sid]
                if self._run_finals([records[s] for s in (sid, *others)], out):
                    continue
            session = records[sid].session
            self._guarded(session, out, partial(self.run_next, session))
        ending = [record.session for record in dict(live).values() if record.ending]
        self._report_errors(out)  # those found before the ends just seen come first
        for session in ending:
            if out.settled(session.sid):
                continue
            if self._guarded(session, out, partial(self.finish, session), finish=True):
                out.finished.append(session.sid)
        return out

    def _run_finals(self, records: list[LiveSession], out: Drained) -> bool:
        """Transcribe the waiting finals of ``records`` (most urgent first) in
        one engine call, those with the first one's options; False when the
        first has none to batch (then it runs alone)."""
        options = records[0].session.options
        taken: list[tuple[StreamSession, FinalWork, float]] = []
        for record in records:
            session = record.session
            if len(taken) == self._batch or session.options != options:
                continue
            work = session.take_final()
            if work is not None:
                taken.append((session, work, self._now()))
                record.served = self._now()
            elif record is records[0]:
                return False
        outcomes: list[list[Segment]] | Exception
        try:
            if len(taken) == 1:  # alone: as run_next would
                outcomes = [self._engine.transcribe(taken[0][1].audio, options)]
            else:
                engine = cast(BatchEngine, self._engine)
                outcomes = engine.transcribe_batch([w.audio for _, w, _ in taken], options)
                self.batches.append(len(taken))
        except Exception as exc:
            outcomes = exc
        for i, (session, work, started) in enumerate(taken):
            outcome = outcomes if isinstance(outcomes, Exception) else outcomes[i]
            self._guarded(session, out, partial(session.commit, work, outcome, started))
        return True

    def _guarded(
        self,
        session: StreamSession,
        out: Drained,
        step: Callable[[], object],
        *,
        finish: bool = False,
    ) -> bool:
        """Run ``step`` of ``session``; False when the session moved or failed
        (noted in ``out``). A failure to deliver ends the worker: the session is
        fine, another worker resumes it."""
        try:
            step()
        except SessionMoved:
            out.moved.append(session.sid)
            return False
        except (BusError, CheckpointError):
            raise
        except Exception:
            log.exception("stream %s failed", session.sid)
            if not finish:
                out.finished.append(session.sid)
                return False
        return True

    def _report_errors(self, out: Drained) -> None:
        """Emit the errors ingestion found."""
        with self._errors_lock:
            errors, self._errors = self._errors, []
        for session, exc in errors:
            try:
                session.error(exc)
            except SessionMoved:
                out.moved.append(session.sid)
