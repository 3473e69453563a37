"""The one place that runs the engines for live streams.

:class:`Scheduler` takes work from :class:`~voxwire.workers.stream.session.StreamSession`
queues and calls an engine where the work needs it; the session's
:meth:`~voxwire.workers.stream.session.StreamSession.commit` (the one path that
turns work into messages) returns what the item comes to, and the caller sends
it. Each engine runs one item at a time, in three steps:

- :meth:`Scheduler.claim` (on the thread that owns the sessions: a worker's
  event loop) takes the most urgent item for an engine, with the options to
  decode it;
- :meth:`Scheduler.decode` (on the engine's thread) runs the engine call and
  finds a diarized final's speakers; it changes nothing else of the session;
- :meth:`Scheduler.commit` (on the sessions' thread again) commits the item
  and returns what each session decided, in the order to send it.

:meth:`Scheduler.run_pending` and :meth:`Scheduler.finish` do the three in a
row for one session. Which item an engine takes:

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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import cast

from voxwire.core.metrics import STREAM_ENGINE_CALLS, STREAM_ENGINE_SECONDS, STREAM_PARTIALS
from voxwire.workers.engine import BatchEngine, Engine, EngineOptions, TranscriptionAborted
from voxwire.workers.stream.intake import FinalWork, LikelyFinalWork, PartialWork
from voxwire.workers.stream.lead import transcribe_after
from voxwire.workers.stream.queue import RANK, Work
from voxwire.workers.stream.session import Decoded, Outbound, Outcome, StreamSession

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


class Idle(Enum):
    """Why :meth:`Scheduler.claim` gave an engine nothing."""

    NOTHING = "nothing"
    """Nothing waits that the engine may take now."""
    HANDED_OFF = "handed off"
    """Work waits that another engine should take (wake the others)."""


@dataclass(frozen=True, slots=True)
class Job:
    """One item an engine took: a session's work and how to decode it."""

    session: StreamSession
    work: Work
    options: EngineOptions | None
    """The engine options to decode it with (None: it needs no engine)."""

    @property
    def needs_thread(self) -> bool:
        """Whether decoding it takes time: an engine call, or a diarized final's speakers."""
        final = isinstance(self.work, FinalWork)
        return self.options is not None or (final and self.session.diarized)


@dataclass(frozen=True, slots=True)
class Claim:
    """What engine ``slot`` took: one item, or the finals of several sessions for one call."""

    slot: int
    jobs: tuple[Job, ...]

    @property
    def needs_thread(self) -> bool:
        """Whether :meth:`Scheduler.decode` should run on the engine's thread
        (else it is done at once: nothing to decode)."""
        return any(job.needs_thread for job in self.jobs)


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
        """``engines``: one per engine thread (``slot`` is an index into them).
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
        self._lock = threading.Lock()  # claims and ranks: queued() may come from another thread
        self._claimed: set[str] = set()  # sessions an engine serves now (partials: see the slots)
        self._served: dict[str, float] = {}  # when each session last had an item taken

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

    def forget(self, sid: str) -> None:
        """Session ``sid`` is gone (done, or moved to another worker)."""
        with self._lock:
            self._served.pop(sid, None)

    # --- the three steps ------------------------------------------------------------------------

    def claim(self, sessions: Mapping[str, StreamSession], slot: int = 0) -> Claim | Idle:
        """Take the most urgent item of ``sessions`` for engine ``slot``, with
        the waiting finals of other sessions that can share its engine call. The
        items stay in flight (and their sessions claimed) until :meth:`commit`."""
        with self._lock:
            taken = self._take(sessions, slot)
            if isinstance(taken, Idle):
                return taken
            session, work = taken
            needs = session.needs_engine(work)
            first = Job(session, work, self._options(session, work, slot) if needs else None)
            jobs = [first]
            if type(work) is FinalWork and first.options is not None and self._batch > 1:
                jobs += self._more_finals(sessions, work, first.options, slot)
            return Claim(slot, tuple(jobs))

    def decode(self, claim: Claim) -> list[Decoded]:
        """What the engine makes of each item of ``claim``, in order (on the
        engine's thread). It reads the sessions' work, and changes nothing of
        them but a diarized final's speakers
        (:meth:`~voxwire.workers.stream.session.StreamSession.speakers_of`)."""
        started = self._now()
        if len(claim.jobs) > 1:
            outcomes = self._transcribe_batch(claim)
        else:
            outcomes = [self._transcribe(claim.jobs[0], claim.slot)]
        finished = self._now()
        return [
            self._decoded(job, outcome, started, finished)
            for job, outcome in zip(claim.jobs, outcomes, strict=True)
        ]

    def commit(
        self, claim: Claim, decoded: Sequence[Decoded]
    ) -> list[tuple[StreamSession, Outbound]]:
        """Commit each item of ``claim`` as ``decoded`` and release them: what
        each session decided, to send in this order."""
        try:
            return [
                (job.session, job.session.commit(job.work, one))
                for job, one in zip(claim.jobs, decoded, strict=True)
            ]
        finally:
            self._release(claim)

    def idle(self, session: StreamSession) -> bool:
        """Whether ``session`` has no work queued and none in an engine."""
        with self._lock:
            busy = session.sid in self._claimed or session.sid in self._partial_sids()
        return not busy and session.next_rank() is None

    # --- one session ----------------------------------------------------------------------------

    def run_next(self, session: StreamSession, slot: int = 0) -> Outbound | None:
        """Run the session's next item on engine ``slot``: what it comes to;
        None when none is queued."""
        claim = self.claim({session.sid: session}, slot)
        if isinstance(claim, Idle):
            return None
        ((_, out),) = self.commit(claim, self.decode(claim))
        return out

    def run_pending(self, session: StreamSession, slot: int = 0) -> list[Outbound]:
        """Run the session's queued work in order, until the queue is empty
        (work queued meanwhile included): what each item came to."""
        done: list[Outbound] = []
        while (out := self.run_next(session, slot)) is not None:
            done.append(out)
        return done

    def finish(self, session: StreamSession, slot: int = 0) -> list[Outbound]:
        """After the session's end: run what is left, then its transcript and
        ``completed`` (nothing after a fatal error). Once only."""
        done = self.run_pending(session, slot) if session.ended else []
        return [*done, session.finish()]

    # --- inside ---------------------------------------------------------------------------------

    def _take(
        self, sessions: Mapping[str, StreamSession], slot: int
    ) -> tuple[StreamSession, Work] | Idle:
        """The most urgent item of a session that may take one now, taken for
        ``slot`` (under the lock)."""
        me = self._slots[slot]
        me.rank = _IDLE
        running = [s for s in self._slots if s.rank != _IDLE]
        if self._cores and sum(s.threads for s in running) + me.threads > self._cores:
            return Idle.NOTHING  # those running finish first, and claim on
        narrow = len(self._slots) - (self._wide is not None)
        partials = sum(1 for s in running if s.rank == _PARTIAL_RANK)
        partial_ok = me is not self._wide and (narrow == 1 or partials + 1 < narrow)
        in_partials = self._partial_sids()
        ranked = []
        for sid, session in sessions.items():
            if sid in self._claimed or (rank := session.next_rank()) is None:
                continue
            if rank[0] == _PARTIAL_RANK and (not partial_ok or sid in in_partials):
                continue
            ranked.append((rank[0], self._served.get(sid, 0.0), rank[1], sid))
        if self._wide is not None and ranked:
            solo = not running and len(ranked) == 1 and ranked[0][0] != _PARTIAL_RANK
            if solo != (me is self._wide):  # the wide engine alone, else the narrow ones
                return Idle.HANDED_OFF
        for _, _, _, sid in sorted(ranked):
            work = sessions[sid].take()
            if work is None:  # closed meanwhile
                continue
            me.rank, me.sid = RANK[type(work)], sid
            me.preempt.clear()
            if me.rank != _PARTIAL_RANK:
                self._claimed.add(sid)
            self._served[sid] = self._now()
            return sessions[sid], work
        return Idle.NOTHING

    def _more_finals(
        self,
        sessions: Mapping[str, StreamSession],
        work: FinalWork,
        options: EngineOptions,
        slot: int,
    ) -> list[Job]:
        """The waiting finals of sessions no engine serves (most urgent first)
        that share ``work``'s engine options, taken (under the lock)."""
        busy = self._claimed | self._partial_sids()
        others = sorted(
            (rank, self._served.get(sid, 0.0), sid)
            for sid, session in sessions.items()
            if sid not in busy and (rank := session.next_rank()) is not None
            and rank[0] == _FINAL_RANK
            and self._options(session, work, slot) == options
        )[: self._batch - 1]  # fmt: skip
        jobs = []
        for *_, sid in others:
            final = sessions[sid].take_final()
            if final is not None:
                self._claimed.add(sid)
                self._served[sid] = self._now()
                jobs.append(Job(sessions[sid], final, options))
        return jobs

    def _partial_sids(self) -> set[str]:
        """The sessions whose partial an engine transcribes now (under the lock)."""
        return {s.sid for s in self._slots if s.rank == _PARTIAL_RANK}

    def _release(self, claim: Claim) -> None:
        """Engine ``claim.slot`` is done with the claim's sessions."""
        with self._lock:
            me = self._slots[claim.slot]
            if me.rank != _PARTIAL_RANK:
                self._claimed.difference_update(job.session.sid for job in claim.jobs)
            me.rank = _IDLE

    def _options(self, session: StreamSession, work: Work, slot: int) -> EngineOptions:
        """The session's engine options for ``work`` on ``slot``'s threads
        (whisper.cpp takes its threads per call)."""
        threads, options = self._slots[slot].threads, session.engine_options(work)
        return replace(options, threads=threads) if threads else options

    def _transcribe(self, job: Job, slot: int) -> Outcome:
        """One item's engine call: its segments or its error (None: no call)."""
        work = job.work
        if job.options is None:
            return None
        assert isinstance(work, PartialWork | FinalWork)
        abort = None
        if isinstance(work, PartialWork):
            abort = self._preempted or self._slots[slot].preempt.is_set
        started = self._now()
        outcome: Outcome
        try:
            engine = self._slots[slot].engine
            outcome = transcribe_after(engine, work.lead, work.audio, job.options, abort)
        except Exception as exc:
            outcome = exc
        _count(work, outcome, self._now() - started)
        return outcome

    def _transcribe_batch(self, claim: Claim) -> list[Outcome]:
        """The claim's finals in one engine call; its error is each one's outcome."""
        options = claim.jobs[0].options
        assert options is not None
        clips = [cast(FinalWork, job.work).audio for job in claim.jobs]
        started = self._now()
        outcomes: list[Outcome]
        try:
            engine = cast(BatchEngine, self._slots[claim.slot].engine)
            outcomes = [*engine.transcribe_batch(clips, options)]
            self.batches.append(len(clips))
        except Exception as exc:
            outcomes = [exc] * len(clips)
        STREAM_ENGINE_SECONDS.labels("final").inc(self._now() - started)
        STREAM_ENGINE_CALLS.labels("final").inc()
        return outcomes

    def _decoded(self, job: Job, outcome: Outcome, started: float, finished: float) -> Decoded:
        """``outcome`` as the commit takes it, a diarized final's speakers found here."""
        try:
            speakers = job.session.speakers_of(job.work, outcome)
        except Exception as exc:  # a bug: the session ends with an error
            return Decoded(exc, started, finished)
        return Decoded(outcome, started, finished, speakers)
