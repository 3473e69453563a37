"""A file's looping decode is caught and decoded again: against a scripted
engine that loops at temperature 0 (the engine is not under test), then
against both real engines on a degraded telephone call that loops, through
the file job."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from evaluation.corpus import corpus_wer
from evaluation.degraded import looping_call
from voxwire.audio.decoding import Audio
from voxwire.wire.records import FileJob
from voxwire.workers.engine import Engine, EngineOptions, Segment, SegmentCallback, Word
from voxwire.workers.engines import create_engine
from voxwire.workers.files import job as file_job
from voxwire.workers.files.loop_guard import LoopGuard, looping_from
from voxwire.workers.loops import loops
from voxwire_client.messages import Message, SegmentMessage

RATE = 16_000
LOOP = "There's nothing going on for the garden."


def _segment(start_ms: int, end_ms: int, text: str, probability: float = 0.8) -> Segment:
    words = text.split()
    step = (end_ms - start_ms) // len(words)
    timed = tuple(
        Word(w, start_ms + i * step, start_ms + (i + 1) * step, probability)
        for i, w in enumerate(words)
    )
    return Segment(start_ms, end_ms, text, words=timed)


class LoopingEngine:
    """Loops at temperature 0 from 10 s of a 60 s file; above 0 it reads the
    window right, unless ``always`` (then it loops at every temperature)."""

    name = "looping"

    def __init__(self, always: bool = False) -> None:
        self.always = always
        self.calls: list[tuple[int, float]] = []

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        offset = round(float(audio[0]) * 60_000)  # where this clip starts in the file
        self.calls.append((offset, options.temperature))
        out: list[Segment] = []
        if options.temperature == 0 and offset < 10_000:
            out = [_segment(0, 5000, "Hello, thanks for calling.")]
            out += [_segment(10_000 + 2000 * k, 12_000 + 2000 * k, LOOP, 0.3) for k in range(8)]
            out = [s for s in out if s.start_ms >= offset]
            out = [
                Segment(s.start_ms - offset, s.end_ms - offset, s.text, words=s.words) for s in out
            ]
        elif self.always and offset < 20_000:
            out = [
                _segment(0, 4000, LOOP + " " + LOOP + " " + LOOP, 0.3 + options.temperature / 10)
            ]
            out += [_segment(4000, 8000, LOOP + " " + LOOP + " " + LOOP, 0.3)]
        elif offset < 20_000:
            out = [
                _segment(0, 6000, "My order has not come."),
                _segment(7000, 12_000, "It is late."),
            ]
        else:
            out = [_segment(0, 3000, "Goodbye.")]
        for segment in out:
            if on_segment is not None:
                on_segment(segment)
        return out

    def close(self) -> None:
        pass


def _run(engine: Engine) -> list[Segment]:
    out: list[Segment] = []
    clock = (np.arange(60 * RATE) / (60 * RATE)).astype(np.float32)  # each sample says its time
    LoopGuard(engine).transcribe(clock, EngineOptions(), out.append)
    return out


def test_a_looping_window_is_decoded_again_at_a_higher_temperature() -> None:
    engine = LoopingEngine()
    out = _run(engine)
    assert [s.text for s in out] == [
        "Hello, thanks for calling.",
        "My order has not come.",
        "It is late.",
        "Goodbye.",
    ]
    assert [s.start_ms for s in out] == [0, 10_000, 17_000, 22_000]
    assert engine.calls == [(0, 0.0), (10_000, 0.2), (22_000, 0.0)]
    assert looping_from(out) is None


def test_when_every_temperature_loops_the_repeats_are_cut() -> None:
    engine = LoopingEngine(always=True)
    out = _run(engine)
    texts = [s.text for s in out]
    assert texts[0] == "Hello, thanks for calling."
    assert texts.count(LOOP) == 1  # the repeated tail is never published
    assert [t for t, _ in engine.calls[1:4]] == [10_000] * 3  # all of the fallback tried
    assert not loops(" ".join(texts))
    word_texts = [w.word for s in out for w in s.words]
    assert " ".join(word_texts).count("garden") == 1


@pytest.fixture(scope="module")
def call() -> tuple[Audio, str]:
    found = looping_call()
    return found.audio, found.reference


def _file_job(engine: Engine, audio: Audio, guard: bool) -> str:
    """The published transcript of ``audio`` as a file job (the guard on or off)."""
    job = FileJob(
        sid="loop", tenant_id="t", audio_key="k", duration_ms=audio.size // 16, model="tiny.en"
    )
    out: list[Message] = []
    original = file_job.LoopGuard
    if not guard:
        file_job.LoopGuard = lambda engine: engine  # type: ignore[assignment,misc,return-value]
    try:
        file_job.run_file_job(job, audio, engine, EngineOptions(language="en"), out.append)
    finally:
        file_job.LoopGuard = original  # type: ignore[misc]
    return " ".join(
        m.segment.text for m in out if isinstance(m, SegmentMessage) and m.type == "final"
    )


def _sentences(text: str) -> list[str]:
    return [" ".join(s.lower().split()) for s in re.split(r"[.?!]", text) if len(s.split()) >= 3]


@pytest.mark.parametrize("engine_name", ["faster-whisper", "whispercpp"])
def test_a_looping_call_is_decoded_again_through_the_file_job(
    engine_name: str, call: tuple[Audio, str]
) -> None:
    audio, reference = call
    engine = create_engine(engine_name, "tiny.en")
    try:
        looped = _file_job(engine, audio, guard=False)
        guarded = _file_job(engine, audio, guard=True)
    finally:
        engine.close()
    assert _most_said(looped) >= 4  # without the guard: one sentence, again and again
    assert _most_said(guarded) <= 2  # with it: no repeated tail
    assert not loops(guarded)
    if engine_name == "faster-whisper":
        # whisper.cpp falls back on its own (entropy, log-probability) and came
        # out 0.870 -> 0.908 here: its loop is gone, the words are no better
        assert corpus_wer([reference], [guarded]) < corpus_wer([reference], [looped])


def _most_said(text: str) -> int:
    """How many times the most said sentence of three words or more is said."""
    sentences = _sentences(text)
    return max((sentences.count(s) for s in sentences), default=0)
