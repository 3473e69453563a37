"""The one place that runs the engines for live streams.

:class:`Scheduler` takes work from :class:`~voxwire.workers.stream.session.StreamSession`
queues, calls an engine where the work needs it, and commits the outcome
through :meth:`StreamSession.commit <voxwire.workers.stream.session.StreamSession.commit>`
(the one path that turns work into messages). It serves one session
(:meth:`Scheduler.run_pending`, :meth:`Scheduler.finish`) or every live
session of a worker (:meth:`Scheduler.drain`, over one :class:`LiveSession`
record per session), with one thread per engine, each running one item at a
time:

- the most urgent kind first (progress, finals, likely finals, partials:
  :data:`~voxwire.workers.stream.queue.RANK`); within a kind, the session
  served longest ago, so a session with a backlog (audio sent faster than
  real time) takes turns with the others instead of going before them;
- a session is served by one engine at a time, except that its final (or
  likely final, or progress) does not wait for its partial: another engine
  takes it, and the partial, stale by then, is dropped;
- a partial never takes the last free engine (kept for finals); with one
  engine, a final or likely final queued while a partial is transcribed
  preempts it (:meth:`Scheduler.queued`), as it preempts its own session's;
- engines run only while their threads fit in the cores; a wide engine (more
  threads than the others) takes a final that is the only work while nothing
  runs, the narrow ones everything else;
- with ``batch_finals`` above 1 and engines that can
  (:class:`~voxwire.workers.engine.BatchEngine`), the finals waiting in
  several sessions (same engine options) share one engine call.

Errors the ingestion thread found (:meth:`Scheduler.report`) are emitted on
an engine's thread, since emitting waits on the bus.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import cast

from voxwire.bus import Record
from voxwire.core.errors import BusError, VoxwireError
from voxwire.core.metrics import STREAM_ENGINE_CALLS, STREAM_ENGINE_SECONDS, STREAM_PARTIALS
from voxwire.workers.engine import (
    BatchEngine,
    Engine,
    EngineOptions,
    Segment,
    TranscriptionAborted,
)
from voxwire.workers.stream.archive import AudioParts
from voxwire.workers.stream.checkpoints import CheckpointError
from voxwire.workers.stream.intake import FinalWork, LikelyFinalWork, PartialWork
from voxwire.workers.stream.lead import transcribe_after
from voxwire.workers.stream.queue import RANK, Work
from voxwire.workers.stream.session import Outcome, StreamSession

log = logging.getLogger(__name__)

_IDLE = 99  # the running rank when nothing runs
_FINAL_RANK = RANK[FinalWork]  # finals only: those of several sessions can share an engine call
_FINAL_RANKS = (_FINAL_RANK, _FINAL_RANK + 1)  # finals and likely finals
_PARTIAL_RANK = RANK[PartialWork]


def _count(work: PartialWork | FinalWork, outcome: object, seconds: float) -> None:
    """The engine time of ``work``, and what became of a partial (metrics)."""
    kind = "partial"
    if isinstance(work, LikelyFinalWork):
        kind = "likely_final"
    elif isinstance(work, FinalWork):
        kind = "final"
    STREAM_ENGINE_SECONDS.labels(kind).inc(seconds)
    STREAM_ENGINE_CALLS.labels(kind).inc()
    if kind == "partial":
        aborted = isinstance(outcome, TranscriptionAborted)
        STREAM_PARTIALS.labels("preempted" if aborted else "transcribed").inc()


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
    archive: AudioParts | None = None
    """The session's audio not written to the archive yet (None: not archived)."""


@dataclass
class Drained:
    """Sessions a :meth:`Scheduler.drain` left: finished, or moved to another worker."""

    finished: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    handed_off: bool = False
    """Work was left for the other engines (wake them)."""

    def settled(self, sid: str) -> bool:
        return sid in self.finished or sid in self.moved


@dataclass(eq=False)
class _Slot:
    """One engine of the scheduler and what it runs now."""

    engine: Engine
    threads: int = 0
    """The cores it computes on (0: not counted)."""
    preempt: threading.Event = field(default_factory=threading.Event)
    rank: int = _IDLE
    """The rank of the item it runs (``_IDLE``: none)."""
    sid: str = ""
    """The session it serves."""


class Scheduler:
    """Runs the engines on the sessions' work; see the module docstring."""

    def __init__(
        self,
        engines: Engine | Sequence[Engine],
        *,
        now: Callable[[], float] = time.monotonic,
        batch_finals: int = 1,
        preempted: Callable[[], bool] | None = None,
        threads: Sequence[int] = (),
        cores: int = 0,
    ) -> None:
        """``engines``: one per thread that calls :meth:`drain` at once.
        ``preempted`` replaces the scheduler's own preemption signal (polled
        while a partial is transcribed: True drops the partial).

        ``threads`` (one per engine) and ``cores``: engines run only while
        the threads of those running fit in the cores. An engine with more
        threads than the others is the wide one: it takes a final (or likely
        final, or progress) when that is the only work and nothing runs, so
        a lone stream gets every core; the narrow ones take the rest, and
        every partial."""
        engines = list(engines) if isinstance(engines, Sequence) else [engines]
        if not engines:
            raise ValueError("a scheduler needs at least one engine")
        counts = list(threads) or [0] * len(engines)
        if len(counts) != len(engines):
            raise ValueError("threads: one count per engine")
        self._slots = [_Slot(engine, n) for engine, n in zip(engines, counts, strict=True)]
        self._cores = cores
        widest = max(counts)
        wide = [s for s in self._slots if s.threads == widest]
        self._wide = wide[0] if widest and len(wide) < len(self._slots) else None
        self._now = now
        batching = all(isinstance(engine, BatchEngine) for engine in engines)
        self._batch = batch_finals if batching else 1
        self.batches: list[int] = []  # the size of each batched call, for tests and benchmarks
        self._preempted = preempted
        self._lock = threading.Lock()  # the claims and the slots' ranks
        self._claimed: set[str] = set()  # sessions an engine serves now (partials: see the slots)
        self._settled: set[str] = set()  # sessions a drain reported finished or moved
        self._reporting: Counter[str] = Counter()  # sessions whose errors are being emitted
        self._errors: list[tuple[StreamSession, VoxwireError, bool]] = []
        self._errors_lock = threading.Lock()

    @property
    def engines(self) -> int:
        return len(self._slots)

    def queued(self, sid: str, rank: int) -> None:
        """Session ``sid`` queued work of ``rank`` (any thread): a final or likely
        final preempts a partial (not a likely final: its final would reuse its
        text): the session's own, else one of another session when no engine is
        free."""
        if rank not in _FINAL_RANKS:
            return
        with self._lock:
            running = [slot for slot in self._slots if slot.rank == _PARTIAL_RANK]
            own = [slot for slot in running if slot.sid == sid]
            if own:
                own[0].preempt.set()
            elif running and all(slot.rank != _IDLE for slot in self._slots):
                running[0].preempt.set()

    def report(self, session: StreamSession, exc: VoxwireError, *, fatal: bool = False) -> None:
        """An error found while ingesting (any thread), emitted by the next drain;
        a fatal one closes the session."""
        with self._errors_lock:
            self._errors.append((session, exc, fatal))

    # --- one session ----------------------------------------------------------------------------

    def run_next(self, session: StreamSession, slot: int = 0) -> bool:
        """Run the session's next item on engine ``slot``; False when none is queued."""
        work = session.take()
        if work is None:
            return False
        self._run(session, work, slot)
        return True

    def _run(self, session: StreamSession, work: Work, slot: int) -> None:
        """Run taken ``work`` of ``session`` on engine ``slot`` and commit it."""
        started = self._now()
        outcome: Outcome = None
        if session.needs_engine(work):
            assert isinstance(work, PartialWork | FinalWork)
            abort = None
            if isinstance(work, PartialWork):
                abort = self._preempted or self._slots[slot].preempt.is_set
            try:
                engine, options = self._slots[slot].engine, self._options(session, work, slot)
                outcome = transcribe_after(engine, work.lead, work.audio, options, abort)
            except Exception as exc:
                outcome = exc
            _count(work, outcome, self._now() - started)
        session.commit(work, outcome, started)

    def _options(self, session: StreamSession, work: Work, slot: int) -> EngineOptions:
        """The session's engine options for ``work`` on ``slot``'s threads
        (whisper.cpp takes its threads per call)."""
        threads, options = self._slots[slot].threads, session.engine_options(work)
        return replace(options, threads=threads) if threads else options

    def run_pending(self, session: StreamSession, slot: int = 0) -> int:
        """Run the session's queued work in order, until the queue is empty
        (work queued meanwhile included). Returns how many items were done."""
        done = 0
        while self.run_next(session, slot):
            done += 1
        return done

    def finish(self, session: StreamSession, slot: int = 0) -> None:
        """After the session's end: run what is left, then emit its transcript
        and ``completed`` (nothing after a fatal error). Once only."""
        if session.ended:
            self.run_pending(session, slot)
        session.finish()

    # --- every session of a worker --------------------------------------------------------------

    def drain(self, live: Mapping[str, LiveSession], slot: int = 0) -> Drained:
        """Run what the sessions have queued on engine ``slot``, the most urgent
        item of any session first; finish the sessions whose end came. Each
        engine's thread calls this at once. A session is served by one engine
        at a time, except that its final (or likely final, or progress) does
        not wait for its partial: another engine takes it, and the partial,
        stale by then, is dropped. A partial never takes the last engine that
        is free (with one engine, finals preempt it instead). A session whose
        ``emit`` raises :class:`SessionMoved` is left alone from then on."""
        out = Drained()
        self._report_errors(out)
        with self._lock:
            self._settled &= live.keys()
        # a copy each time: the event loop may open and forget sessions meanwhile
        while (claimed := self._claim(records := dict(live), slot, out)) is not None:
            sid, work = claimed
            session = records[sid].session
            try:
                final = type(work) is FinalWork and session.needs_engine(work)
                if final and self._batch > 1:
                    assert isinstance(work, FinalWork)
                    self._run_finals(records, sid, work, slot, out)
                else:
                    self._guarded(session, out, partial(self._run, session, work, slot))
            finally:
                self._release(slot, sid)
        self._report_errors(out)  # those found before the ends just seen come first
        for record in dict(live).values():
            session = record.session
            if record.ending and self._claim_end(session.sid):
                try:
                    step = partial(self.finish, session, slot)
                    if self._guarded(session, out, step, finish=True):
                        out.finished.append(session.sid)
                finally:
                    self._release(slot, session.sid)
        with self._lock:
            self._settled.update(out.finished, out.moved)
        return out

    def _claim(
        self, records: Mapping[str, LiveSession], slot: int, out: Drained
    ) -> tuple[str, Work] | None:
        """The most urgent item of a session that may take one now, taken for
        ``slot``; None when none waits, or none that ``slot`` should take
        (``out.handed_off`` then)."""
        with self._lock:
            me = self._slots[slot]
            me.rank = _IDLE
            running = [s for s in self._slots if s.rank != _IDLE]
            if self._cores and sum(s.threads for s in running) + me.threads > self._cores:
                return None  # those running finish first, and claim on
            narrow = len(self._slots) - (self._wide is not None)
            partials = sum(1 for s in running if s.rank == _PARTIAL_RANK)
            partial_ok = me is not self._wide and (narrow == 1 or partials + 1 < narrow)
            ranked = []
            for sid, record in records.items():
                if sid in self._claimed or sid in self._settled:
                    continue
                rank = record.session.next_rank()
                if rank is None:
                    continue
                if rank[0] == _PARTIAL_RANK and (not partial_ok or sid in self._partial_sids()):
                    continue
                ranked.append((rank[0], record.served, rank[1], sid))
            if self._wide is not None and ranked:
                solo = not running and len(ranked) == 1 and ranked[0][0] != _PARTIAL_RANK
                if solo != (me is self._wide):  # the wide engine alone, else the narrow ones
                    out.handed_off = True
                    return None
            for _, _, _, sid in sorted(ranked):
                work = records[sid].session.take()
                if work is None:  # closed meanwhile
                    continue
                me.rank, me.sid = RANK[type(work)], sid
                me.preempt.clear()
                if me.rank != _PARTIAL_RANK:
                    self._claimed.add(sid)
                records[sid].served = self._now()
                return sid, work
            return None

    def _partial_sids(self) -> set[str]:
        """The sessions whose partial an engine transcribes now (under the lock)."""
        return {s.sid for s in self._slots if s.rank == _PARTIAL_RANK}

    def _claim_end(self, sid: str) -> bool:
        """Claim an ending session for its finish; False when an engine serves it."""
        with self._lock:
            if sid in self._claimed or sid in self._partial_sids() or sid in self._settled:
                return False
            if sid in self._reporting:
                return False
            self._claimed.add(sid)
            return True

    def _release(self, slot: int, sid: str) -> None:
        """``slot`` is done with ``sid``."""
        with self._lock:
            me = self._slots[slot]
            if me.rank != _PARTIAL_RANK:
                self._claimed.discard(sid)
            me.rank = _IDLE

    def _run_finals(
        self,
        records: Mapping[str, LiveSession],
        first: str,
        work: FinalWork,
        slot: int,
        out: Drained,
    ) -> None:
        """Transcribe ``first``'s final ``work`` and the waiting finals of
        sessions no engine serves (most urgent first) in one engine call,
        those with the first one's options."""
        options = self._options(records[first].session, work, slot)
        with self._lock:
            busy = self._claimed | self._partial_sids() | self._settled
            others = sorted(
                (rank, record.served, sid)
                for sid, record in records.items()
                if sid not in busy and (rank := record.session.next_rank()) is not None
                and rank[0] == _FINAL_RANK
                and self._options(record.session, work, slot) == options
            )[: self._batch - 1]  # fmt: skip
            self._claimed.update(sid for _, _, sid in others)
        try:
            taken = [(records[first].session, work, self._now())]
            for *_, sid in others:
                other = records[sid].session.take_final()
                if other is not None:
                    taken.append((records[sid].session, other, self._now()))
                    records[sid].served = self._now()
            self._run_batch(taken, options, slot, out)
        finally:
            with self._lock:
                self._claimed.difference_update(sid for _, _, sid in others)

    def _run_batch(
        self,
        taken: list[tuple[StreamSession, FinalWork, float]],
        options: EngineOptions,
        slot: int,
        out: Drained,
    ) -> None:
        engine = self._slots[slot].engine
        outcomes: list[list[Segment]] | Exception
        try:
            if len(taken) == 1:  # alone: as run_next would
                outcomes = [transcribe_after(engine, taken[0][1].lead, taken[0][1].audio, options)]
            else:
                outcomes = cast(BatchEngine, engine).transcribe_batch(
                    [w.audio for _, w, _ in taken], options
                )
                self.batches.append(len(taken))
        except Exception as exc:
            outcomes = exc
        STREAM_ENGINE_SECONDS.labels("final").inc(self._now() - taken[0][2])
        STREAM_ENGINE_CALLS.labels("final").inc()
        for i, (session, work, started) in enumerate(taken):
            outcome = outcomes if isinstance(outcomes, Exception) else outcomes[i]
            self._guarded(session, out, partial(session.commit, work, outcome, started))

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
            with self._lock:
                self._settled.add(session.sid)
            return False
        except (BusError, CheckpointError):
            raise
        except Exception:
            log.exception("stream %s failed", session.sid)
            if not finish:
                out.finished.append(session.sid)
                with self._lock:
                    self._settled.add(session.sid)
                return False
        return True

    def _report_errors(self, out: Drained) -> None:
        """Emit the errors ingestion found; no session is finished before its
        errors are out."""
        with self._lock:
            with self._errors_lock:
                errors, self._errors = self._errors, []
            sids = [session.sid for session, _, _ in errors]
            self._reporting.update(sids)
        try:
            for session, exc, fatal in errors:
                try:
                    session.error(exc, fatal=fatal)
                except SessionMoved:
                    out.moved.append(session.sid)
        finally:
            with self._lock:
                self._reporting.subtract(sids)
                self._reporting = +self._reporting
