"""The scheduler over several sessions, without a bus: finals before partials,
finals of several sessions in one engine call, and one commit path for both."""

from __future__ import annotations

import threading
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
from voxwire.workers.stream.scheduler import LiveSession, Scheduler
from voxwire.workers.stream.session import StreamConfig, StreamSession
from voxwire_client.messages import ErrorMessage, Message, SegmentMessage


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


def make_sessions(
    count: int,
    scheduler: Scheduler,
    clock: Clock,
    *,
    speech: tuple[int, int],
    seconds: float,
    partial_interval_s: float = 0,
    ended: bool = True,
) -> tuple[dict[str, LiveSession], dict[str, list[Message]]]:
    """``count`` sessions fed ``seconds`` of tone with ``speech`` (ms) voiced,
    their work queued and not run, and the messages each emits."""
    live: dict[str, LiveSession] = {}
    emitted: dict[str, list[Message]] = {}
    config = StreamConfig(partial_interval_s=partial_interval_s)
    for n in range(count):
        out = emitted[f"s{n}"] = []
        session = StreamSession(
            f"s{n}", EngineOptions(), config, (), out.append,
            vad=ScriptedVad([(*speech, 0.95)]), now=clock, on_queued=scheduler.queued,
        )  # fmt: skip
        for index, chunk in enumerate(chunks(tone(seconds))):
            session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
        if ended:
            session.end(seconds)
        live[session.sid] = LiveSession(session, b"start", partition=0, ending=ended)
    return live, emitted


def sessions(
    count: int, scheduler: Scheduler, clock: Clock
) -> tuple[dict[str, LiveSession], dict[str, list[Message]]]:
    """``count`` sessions that have all their speech queued at once (no
    partials), and the messages each emits."""
    return make_sessions(count, scheduler, clock, speech=(1000, 2000), seconds=4.0)


def test_the_finals_of_several_sessions_share_one_engine_call() -> None:
    clock = Clock()
    engine = BatchScripted()
    scheduler = Scheduler(engine, now=clock, batch_finals=8)
    live, emitted = sessions(3, scheduler, clock)
    drained = scheduler.drain(live)
    assert sorted(drained.finished) == ["s0", "s1", "s2"] and drained.moved == []
    assert engine.batched == [3] and scheduler.batches == [3]
    for sid, out in emitted.items():
        (final,) = of_type(out, "final")
        assert final.segment.id == f"{sid}-0"
        assert [m.type for m in out][-2:] == ["transcript", "progress"]
        assert [m.seq for m in out] == list(range(2, 2 + len(out)))


def test_an_engine_error_in_a_batch_costs_each_session_its_segment() -> None:
    clock = Clock()
    scheduler = Scheduler(BatchScripted(fail=True), now=clock, batch_finals=8)
    live, emitted = sessions(2, scheduler, clock)
    scheduler.drain(live)
    for out in emitted.values():
        errors = [m for m in out if isinstance(m, ErrorMessage)]
        assert [(e.code, e.fatal) for e in errors] == [("engine", False)]
        assert of_type(out, "final") == [] and out[-1].type == "progress"


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


def test_two_engines_transcribe_two_sessions_finals_at_once() -> None:
    """Finals decided together are not served one after the other: a second
    engine takes the second session's final while the first is busy."""
    clock = Clock()
    slow, fast = GatedEngine(), ScriptedEngine()
    scheduler = Scheduler([slow, fast], now=clock)
    live, emitted = sessions(2, scheduler, clock)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(scheduler.drain, live, 0)
        assert slow.started.wait(5)
        second = scheduler.drain(live, 1)  # while the first engine is held
        (busy,) = [sid for sid, out in emitted.items() if not of_type(out, "final")]
        (done,) = second.finished
        assert done != busy and len(of_type(emitted[done], "final")) == 1
        slow.gate.set()
        assert first.result(10).finished == [busy]
    for out in emitted.values():
        assert [m.seq for m in out] == list(range(2, 2 + len(out)))
        assert [m.type for m in out][-2:] == ["transcript", "progress"]


def partial_sessions(
    count: int, scheduler: Scheduler, clock: Clock
) -> tuple[dict[str, LiveSession], dict[str, list[Message]]]:
    """``count`` sessions that have spoken for 2.5 s and are still talking:
    each has a partial queued, no final."""
    return make_sessions(
        count, scheduler, clock, speech=(0, 60_000), seconds=2.5, partial_interval_s=2.0,
        ended=False,
    )  # fmt: skip


def test_a_partial_never_takes_the_last_free_engine() -> None:
    """With two engines, one partial runs while the other engine stays free
    for a final; the other session's partial waits (or is superseded)."""
    clock = Clock()
    first, second = GatedEngine(), ScriptedEngine()
    scheduler = Scheduler([first, second], now=clock)
    live, emitted = partial_sessions(2, scheduler, clock)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(scheduler.drain, live, 0)
        assert first.started.wait(5)
        scheduler.drain(live, 1)
        assert second.calls == []  # the second partial did not take the free engine
        first.gate.set()
        running.result(10)
    assert sum(len(of_type(out, "partial")) for out in emitted.values()) == 2
    assert len(second.calls) == 0 and len(first.calls) == 2


def test_a_final_does_not_wait_for_its_own_sessions_partial() -> None:
    """While one engine transcribes a session's partial, the session's final
    goes to the free engine; the partial, finished after it, is not sent."""
    clock = Clock()
    held, free = GatedEngine(), ScriptedEngine()
    scheduler = Scheduler([held, free], now=clock)
    out: list[Message] = []
    session = StreamSession(
        "f1", EngineOptions(), StreamConfig(partial_interval_s=2.0), (), out.append,
        vad=ScriptedVad([(0, 2600, 0.95)]), now=clock, on_queued=scheduler.queued,
    )  # fmt: skip
    live = {"f1": LiveSession(session, b"start", partition=0)}
    pieces = chunks(tone(4.0))
    for index, chunk in enumerate(pieces[:25]):  # 2.5 s: a partial is due
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(scheduler.drain, live, 0)
        assert held.started.wait(5)  # the partial holds the first engine
        for index, chunk in enumerate(pieces[25:], start=25):  # the pause: its final is due
            session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
        scheduler.drain(live, 1)
        assert [m.type for m in out if isinstance(m, SegmentMessage)][-1] == "final"
        held.gate.set()
        running.result(10)
    kinds = [m.type for m in out if isinstance(m, SegmentMessage)]
    assert kinds.count("final") == 1 and kinds[-1] == "final"  # the stale partial was dropped
    assert session.late_partials + session.preempted_partials == 1


def test_a_lone_final_goes_to_the_wide_engine_and_finals_together_to_the_narrow_ones() -> None:
    """With a 2-thread engine beside two 1-thread ones on 2 cores, the only
    final waiting gets both cores; finals that come together get one each."""
    clock = Clock()
    wide, one, two = ScriptedEngine(), ScriptedEngine(), ScriptedEngine()
    scheduler = Scheduler([wide, one, two], now=clock, threads=[2, 1, 1], cores=2)
    live, _ = sessions(1, scheduler, clock)
    for record in live.values():
        record.ending = False  # only the final is due, not the stream's end
    assert scheduler.drain(live, 1).handed_off and one.calls == []  # left for the wide one
    scheduler.drain(live, 0)
    assert len(wide.calls) == 1 and one.calls == []
    clock2 = Clock()
    live, _ = sessions(2, scheduler, clock2)
    for record in live.values():
        record.ending = False
    assert scheduler.drain(live, 0).handed_off and len(wide.calls) == 1  # two: the narrow ones
    assert scheduler.drain(live, 1).handed_off  # took one; the one left alone is the wide's
    assert len(one.calls) == 1 and len(wide.calls) == 1
