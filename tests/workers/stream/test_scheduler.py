"""The scheduler over several sessions, without a bus: finals before partials,
finals of several sessions in one engine call, two engines at once, and one
commit path for all. Claims and commits run here, as on a worker's event
loop; a decode held in an engine runs on a thread of its own."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from tests.workers.stream.test_session import (
    CHUNK_MS,
    Clock,
    ScriptedEngine,
    ScriptedVad,
    chunks,
    of_type,
    tone,
)
from voxwire.audio.decoding import Audio
from voxwire.core.errors import EngineError
from voxwire.workers.engine import EngineOptions, Segment
from voxwire.workers.stream.scheduler import Claim, Idle, Scheduler
from voxwire.workers.stream.session import Decoded, StreamConfig, StreamSession
from voxwire_client.messages import ErrorMessage, Message, SegmentMessage
from voxwire_client.options import Endpointing


class BatchScripted(ScriptedEngine):
    """A scripted engine that can also transcribe clips in one call."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.batched: list[int] = []
        self.fail = fail

    def transcribe_batch(self, clips: list[Audio], options: EngineOptions) -> list[list[Segment]]:
        self.batched.append(len(clips))
        if self.fail:
            raise EngineError("boom", hint="retry")
        return [self.transcribe(clip, options) for clip in clips]


Sessions = dict[str, StreamSession]
Emitted = dict[str, list[Message]]


def make_sessions(
    count: int,
    scheduler: Scheduler,
    *,
    speech: tuple[int, int],
    seconds: float,
    partial_interval_s: float = 0,
    ended: bool = True,
) -> tuple[Sessions, Emitted]:
    """``count`` sessions fed ``seconds`` of tone with ``speech`` (ms) voiced,
    their work queued and not run, and a list for the messages of each."""
    sessions: Sessions = {}
    config = StreamConfig(endpointing=Endpointing(partial_interval_s=partial_interval_s))
    for n in range(count):
        session = StreamSession(
            f"s{n}", EngineOptions(), config, (),
            vad=ScriptedVad([(*speech, 0.95)]), now=Clock(), on_queued=scheduler.queued,
        )  # fmt: skip
        for index, chunk in enumerate(chunks(tone(seconds))):
            session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
        if ended:
            session.end(seconds)
        sessions[session.sid] = session
    return sessions, {sid: [] for sid in sessions}


def sessions_with_finals(count: int, scheduler: Scheduler) -> tuple[Sessions, Emitted]:
    """``count`` sessions that have all their speech queued at once (no partials)."""
    return make_sessions(count, scheduler, speech=(1000, 2000), seconds=4.0)


def committed(scheduler: Scheduler, claim: Claim, decoded: list[Decoded], out: Emitted) -> None:
    for session, returned in scheduler.commit(claim, decoded):
        out[session.sid] += returned.messages


def drain(scheduler: Scheduler, sessions: Mapping[str, StreamSession], out: Emitted) -> Idle:
    """What a worker's engine loop does for slot 0: claim, decode, commit until
    nothing is left for it, then finish the sessions that ended."""
    while not isinstance(claim := scheduler.claim(sessions, 0), Idle):
        committed(scheduler, claim, scheduler.decode(claim), out)
    for session in sessions.values():
        if session.ended and scheduler.idle(session):
            out[session.sid] += session.finish().messages
    return claim


def test_the_finals_of_several_sessions_share_one_engine_call() -> None:
    engine = BatchScripted()
    scheduler = Scheduler(engine, now=Clock(), batch_finals=8)
    sessions, out = sessions_with_finals(3, scheduler)
    drain(scheduler, sessions, out)
    assert engine.batched == [3] and scheduler.batches == [3]
    for sid, messages in out.items():
        (final,) = of_type(messages, "final")
        assert final.segment.id == f"{sid}-0"
        assert [m.type for m in messages][-2:] == ["transcript", "progress"]
        assert [m.seq for m in messages] == list(range(2, 2 + len(messages)))


def test_an_engine_error_in_a_batch_costs_each_session_its_segment() -> None:
    scheduler = Scheduler(BatchScripted(fail=True), now=Clock(), batch_finals=8)
    sessions, out = sessions_with_finals(2, scheduler)
    drain(scheduler, sessions, out)
    for messages in out.values():
        errors = [m for m in messages if isinstance(m, ErrorMessage)]
        assert [(e.code, e.fatal) for e in errors] == [("engine", False)]
        assert of_type(messages, "final") == [] and messages[-1].type == "progress"


def test_progress_needs_no_engine_thread_and_a_final_does() -> None:
    scheduler = Scheduler(ScriptedEngine(), now=Clock())
    sessions, out = sessions_with_finals(1, scheduler)
    kinds = []
    while not isinstance(claim := scheduler.claim(sessions, 0), Idle):
        kinds.append((type(claim.jobs[0].work).__name__, claim.needs_thread))
        committed(scheduler, claim, scheduler.decode(claim), out)
    assert kinds == [
        ("ProgressWork", False), ("ProgressWork", False), ("FinalWork", True),
        ("ProgressWork", False),
    ]  # fmt: skip


class GatedEngine(ScriptedEngine):
    """A scripted engine whose calls wait until the test opens its gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.started = threading.Event()

    def transcribe(self, audio: Audio, options: EngineOptions, **kwargs: object) -> list[Segment]:
        self.started.set()
        assert self.gate.wait(10), "the gate was never opened"
        return super().transcribe(audio, options, **kwargs)  # type: ignore[arg-type]


def first_decode(scheduler: Scheduler, sessions: Sessions, slot: int, out: Emitted) -> Claim:
    """Commit what needs no engine on ``slot``; the claim of the first item that does."""
    while not isinstance(claim := scheduler.claim(sessions, slot), Idle):
        if claim.needs_thread:
            return claim
        committed(scheduler, claim, scheduler.decode(claim), out)
    raise AssertionError(f"nothing to decode for engine {slot}: {claim}")


def test_two_engines_transcribe_two_sessions_finals_at_once() -> None:
    """Finals decided together are not served one after the other: while the
    first engine decodes one session's final, the second takes the other's,
    and its final is committed (sent) first."""
    slow, fast = GatedEngine(), ScriptedEngine()
    scheduler = Scheduler([slow, fast], now=Clock())
    sessions, out = sessions_with_finals(2, scheduler)
    held = first_decode(scheduler, sessions, 0, out)
    with ThreadPoolExecutor(1) as pool:
        decoding = pool.submit(scheduler.decode, held)
        assert slow.started.wait(5)
        other = first_decode(scheduler, sessions, 1, out)
        busy, free = held.jobs[0].session.sid, other.jobs[0].session.sid
        assert busy != free
        committed(scheduler, other, scheduler.decode(other), out)
        assert len(of_type(out[free], "final")) == 1 and not of_type(out[busy], "final")
        slow.gate.set()
        committed(scheduler, held, decoding.result(10), out)
    drain(scheduler, sessions, out)
    for messages in out.values():
        assert [m.seq for m in messages] == list(range(2, 2 + len(messages)))
        assert [m.type for m in messages][-2:] == ["transcript", "progress"]


def partial_sessions(count: int, scheduler: Scheduler) -> tuple[Sessions, Emitted]:
    """``count`` sessions that have spoken for 2.5 s and are still talking:
    each has a partial queued, no final."""
    return make_sessions(
        count, scheduler, speech=(0, 60_000), seconds=2.5, partial_interval_s=2.0, ended=False
    )


def test_a_partial_never_takes_the_last_free_engine() -> None:
    """With two engines, one partial runs while the other engine stays free
    for a final; the other session's partial waits its turn."""
    first, second = ScriptedEngine(), ScriptedEngine()
    scheduler = Scheduler([first, second], now=Clock())
    sessions, out = partial_sessions(2, scheduler)
    running = first_decode(scheduler, sessions, 0, out)  # progress committed: a partial
    assert type(running.jobs[0].work).__name__ == "PartialWork"
    while not isinstance(claim := scheduler.claim(sessions, 1), Idle):
        assert claim.jobs[0].options is None  # progress only, no partial
        committed(scheduler, claim, scheduler.decode(claim), out)
    assert claim is Idle.NOTHING
    committed(scheduler, running, scheduler.decode(running), out)
    drain(scheduler, sessions, out)
    assert sum(len(of_type(messages, "partial")) for messages in out.values()) == 2
    assert len(second.calls) == 0 and len(first.calls) == 2


def test_a_final_does_not_wait_for_its_own_sessions_partial() -> None:
    """While one engine transcribes a session's partial, the session's final
    goes to the free engine; the partial, finished after it, is not sent."""
    scheduler = Scheduler([ScriptedEngine(), ScriptedEngine()], now=Clock())
    out: Emitted = {"f1": []}
    session = StreamSession(
        "f1", EngineOptions(), StreamConfig(endpointing=Endpointing(partial_interval_s=2.0)),
        (), vad=ScriptedVad([(0, 2600, 0.95)]), now=Clock(), on_queued=scheduler.queued,
    )  # fmt: skip
    sessions = {"f1": session}
    pieces = chunks(tone(4.0))
    for index, chunk in enumerate(pieces[:25]):  # 2.5 s: a partial is due
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    partial = first_decode(scheduler, sessions, 0, out)  # the partial holds the first engine
    for index, chunk in enumerate(pieces[25:], start=25):  # the pause: its final is due
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    final = first_decode(scheduler, sessions, 1, out)
    committed(scheduler, final, scheduler.decode(final), out)
    assert [m.type for m in out["f1"] if isinstance(m, SegmentMessage)] == ["final"]
    committed(scheduler, partial, scheduler.decode(partial), out)  # preempted, or late
    kinds = [m.type for m in out["f1"] if isinstance(m, SegmentMessage)]
    assert kinds == ["final"]  # the stale partial was dropped
    assert session.late_partials + session.preempted_partials == 1


def test_a_lone_final_goes_to_the_wide_engine_and_finals_together_to_the_narrow_ones() -> None:
    """With a 2-thread engine beside two 1-thread ones on 2 cores, the only
    final waiting gets both cores; finals that come together get one each."""
    wide, one, two = ScriptedEngine(), ScriptedEngine(), ScriptedEngine()
    scheduler = Scheduler([wide, one, two], now=Clock(), threads=[2, 1, 1], cores=2)
    lone, out = make_sessions(1, scheduler, speech=(1000, 2000), seconds=4.0, ended=False)
    assert scheduler.claim(lone, 1) is Idle.HANDED_OFF and one.calls == []  # the wide one's
    while not isinstance(claim := scheduler.claim(lone, 0), Idle):
        committed(scheduler, claim, scheduler.decode(claim), out)
    assert len(wide.calls) == 1 and one.calls == []
    pair, out = make_sessions(2, scheduler, speech=(1000, 2000), seconds=4.0, ended=False)
    assert scheduler.claim(pair, 0) is Idle.HANDED_OFF and len(wide.calls) == 1  # two: narrow
    while not isinstance(claim := scheduler.claim(pair, 1), Idle):
        committed(scheduler, claim, scheduler.decode(claim), out)
    assert claim is Idle.HANDED_OFF  # took one; the one left alone is the wide's
    assert len(one.calls) == 1 and len(wide.calls) == 1
