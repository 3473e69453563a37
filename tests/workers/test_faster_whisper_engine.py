"""The faster-whisper engine on the shipped CTranslate2 tiny.en checkpoint:
accuracy on the eval set (the same bound whisper.cpp meets), live segments,
options and errors."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import REGISTRY

from evaluation.corpus import corpus_wer, eval_with_text, word_errors
from tests.helpers import SAME_WORDS_MARGIN
from tests.models.conftest import JFK_ID, jfk_audio, reference_text, wer
from voxwire.audio.decoding import SAMPLE_RATE, decode
from voxwire.core.errors import EngineError, ModelError
from voxwire.workers.engine import EngineOptions, Segment, TranscriptionAborted
from voxwire.workers.engines import available, create_engine
from voxwire.workers.engines.faster_whisper import FasterWhisperEngine
from voxwire.workers.engines.windowed import looped, window_frames

pytestmark = pytest.mark.timeout(300)
OPTIONS = EngineOptions(language="en", beam_size=1, threads=2)


def _text(segments: list[Segment]) -> str:
    return " ".join(s.text for s in segments)


def test_transcribes_jfk_with_live_segments(engine: FasterWhisperEngine) -> None:
    seen: list[Segment] = []
    segments = engine.transcribe(jfk_audio(), OPTIONS, seen.append)
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10, _text(segments)
    assert seen == segments
    assert all(0 <= s.start_ms <= s.end_ms <= 11_000 for s in segments)
    assert segments[-1].end_ms >= 8_000, "times are in milliseconds"


def test_the_eval_set_is_as_accurate_as_with_whisper_cpp(engine: FasterWhisperEngine) -> None:
    refs, hyps = [], []
    for item in eval_with_text():
        audio = decode(item.path.read_bytes(), max_seconds=120).samples
        refs.append(item.text or "")
        hyps.append(_text(engine.transcribe(audio, OPTIONS)))
    assert corpus_wer(refs, hyps) <= 0.06


def test_options_errors_and_abort(engine: FasterWhisperEngine) -> None:
    assert engine.transcribe(np.zeros(SAMPLE_RATE // 20, dtype=np.float32), OPTIONS) == []
    with pytest.raises(EngineError, match="English-only"):
        engine.transcribe(jfk_audio(), EngineOptions(language="de"))
    with pytest.raises(EngineError, match="float"):
        engine.transcribe(np.zeros(SAMPLE_RATE, dtype=np.int16), OPTIONS)  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="NaN"):
        engine.transcribe(np.full(SAMPLE_RATE, np.nan, dtype=np.float32), OPTIONS)
    with pytest.raises(TranscriptionAborted):
        engine.transcribe(jfk_audio(), OPTIONS, abort=lambda: True)
    beam = engine.transcribe(jfk_audio(), EngineOptions(language="en", beam_size=2))
    assert wer(reference_text(JFK_ID), _text(beam)) <= 0.10


def test_a_callback_error_stops_the_run_as_it_is(engine: FasterWhisperEngine) -> None:
    def boom(_segment: Segment) -> None:
        raise KeyError("from the caller")

    with pytest.raises(KeyError, match="from the caller"):
        engine.transcribe(jfk_audio(), OPTIONS, boom)
    assert engine.transcribe(jfk_audio(), OPTIONS)  # the engine still works


def test_the_factory_knows_it_and_refuses_what_is_not_a_checkpoint(tmp_path: Path) -> None:
    assert "faster-whisper" in available()
    with pytest.raises(ModelError, match="CTranslate2"):
        create_engine("faster-whisper", tmp_path)
    closed = create_engine("faster-whisper", "tiny.en")
    closed.close()
    with pytest.raises(EngineError, match="closed"):
        closed.transcribe(jfk_audio(), OPTIONS)


def test_a_batch_of_clips_reads_as_each_clip_alone(engine: FasterWhisperEngine) -> None:
    """Endpointed utterances of several sessions, in one engine call."""
    items = [i for i in eval_with_text() if i.duration_s <= 12][:6]
    clips = [decode(i.path.read_bytes()).samples for i in items]
    refs = [i.text for i in items]
    alone = [_text(engine.transcribe(clip, OPTIONS)) for clip in clips]
    batched = engine.transcribe_batch(clips, OPTIONS)
    assert len(batched) == len(clips)
    for clip, segments in zip(clips, batched, strict=True):
        assert len(segments) == 1
        assert segments[0].start_ms == 0 and segments[0].end_ms == len(clip) * 1000 // SAMPLE_RATE
    together = [_text(s) for s in batched]
    assert word_errors(refs, together) <= word_errors(refs, alone) + SAME_WORDS_MARGIN, together
    silent = engine.transcribe_batch([np.zeros(SAMPLE_RATE, dtype=np.float32)], OPTIONS)
    assert silent == [[]]
    assert engine.transcribe_batch([], OPTIONS) == []


def test_short_clips_on_a_short_window_read_as_on_the_whole_window(
    engine: FasterWhisperEngine,
) -> None:
    """The eval set's clips under 15 s (the first ten), each on a 10 s window (at
    least the clip and 4 s more), as live finals may be: at most two word errors
    more than on Whisper's 30 s window; a clip whose short window loops is decoded again on the
    whole window; a clip as long as the window is decoded as always."""
    assert [window_frames(n * SAMPLE_RATE // 10, 10) for n in (1, 55, 61, 251, 300)] == [
        1000,
        1000,
        1100,
        None,
        None,
    ]
    assert window_frames(SAMPLE_RATE, 0) is None
    short = replace(OPTIONS, window_s=10)
    refs, whole, fit = [], [], []
    for item in eval_with_text():
        audio = decode(item.path.read_bytes(), max_seconds=120).samples
        if audio.size >= 15 * SAMPLE_RATE or len(refs) == 10:
            continue
        refs.append(item.text or "")
        fit.append(_text(engine.transcribe(audio, short)))
        whole.append(_text(engine.transcribe(audio, OPTIONS)))
    assert len(refs) == 10
    assert word_errors(refs, fit) <= word_errors(refs, whole) + SAME_WORDS_MARGIN, (fit, whole)
    redone = REGISTRY.get_sample_value("voxwire_engine_windows_redone_total") or 0.0
    long = np.concatenate([jfk_audio()] * 3)  # 33 s: two windows of 30 s
    text = _text(engine.transcribe(long, short))
    assert wer(" ".join([reference_text(JFK_ID)] * 3), text) <= 0.10, text
    assert REGISTRY.get_sample_value("voxwire_engine_windows_redone_total") == redone


def test_a_loop_is_told_from_speech() -> None:
    """What :func:`looped` takes for a loop: a text that compresses too well, or
    far more tokens than speech has in the time."""

    @dataclass
    class Piece:
        tokens: list[int]
        compression_ratio: float

    speech = [Piece(list(range(12)), 1.2), Piece(list(range(9)), 1.1)]
    assert not looped(speech, 4 * SAMPLE_RATE)
    assert looped([Piece(list(range(12)), 9.5)], 4 * SAMPLE_RATE)
    assert looped([Piece(list(range(112)), 1.9)], 2 * SAMPLE_RATE)
