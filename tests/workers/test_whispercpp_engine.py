"""The whisper.cpp engine: accuracy, live segments, options, errors, isolation."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.models.conftest import JFK_ID, jfk_audio, reference_text, run_isolated, wer
from voxwire.audio.decoding import SAMPLE_RATE
from voxwire.core.errors import ConfigError, EngineError
from voxwire.workers.engine import EngineOptions, Segment, clean_text
from voxwire.workers.engines import available, create_engine
from voxwire.workers.engines.whispercpp import WhisperCppEngine

OPTIONS = EngineOptions(language="en", beam_size=1, threads=2)


def _text(segments: list[Segment]) -> str:
    return " ".join(s.text for s in segments)


@pytest.mark.timeout(120)
def test_transcribes_jfk(whispercpp_engine: WhisperCppEngine) -> None:
    seen: list[Segment] = []
    segments = whispercpp_engine.transcribe(jfk_audio(), OPTIONS, seen.append)
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10, _text(segments)
    assert seen == segments
    assert all(0 <= s.start_ms <= s.end_ms <= 11_000 for s in segments)
    assert segments[-1].end_ms >= 8_000, "times are in milliseconds"
    starts = [s.start_ms for s in segments]
    assert starts == sorted(starts)


@pytest.mark.timeout(180)
def test_segments_arrive_while_transcribing(whispercpp_engine: WhisperCppEngine) -> None:
    gap = np.zeros(2 * SAMPLE_RATE, dtype=np.float32)
    speech = jfk_audio()
    audio = np.concatenate([speech, gap, speech, gap, speech])  # about 37 s: two windows
    arrivals: list[tuple[float, Segment]] = []
    segments = whispercpp_engine.transcribe(
        audio, OPTIONS, lambda s: arrivals.append((time.monotonic(), s))
    )
    finished = time.monotonic()
    assert [s for _, s in arrivals] == segments
    # whisper.cpp decodes 30 s windows: the first window's segments are handed
    # over, then the second window is computed, then its segments follow.
    first, last = arrivals[0][0], arrivals[-1][0]
    assert last - first > 0.05, "all segments arrived at once, at the end"
    assert first < finished
    reference = " ".join([reference_text(JFK_ID)] * 3)
    assert wer(reference, _text(segments)) <= 0.15, _text(segments)
    assert segments[-1].end_ms <= len(audio) * 1000 // SAMPLE_RATE


@pytest.mark.timeout(120)
def test_silence_gives_no_segments(f16_engine: WhisperCppEngine) -> None:
    seen: list[Segment] = []
    silence = np.zeros(5 * SAMPLE_RATE, dtype=np.float32)
    assert f16_engine.transcribe(silence, OPTIONS, seen.append) == []
    assert seen == []


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (" [BLANK_AUDIO]", ""),
        ("[ Silence ]", ""),
        (" (music)", ""),
        (" ♪ (upbeat music) ♪", ""),
        ("", ""),
        ("  ", ""),
        (" Hello [BLANK_AUDIO] world.", "Hello world."),
        (" I (really) mean it.", "I (really) mean it."),
        (" And so, my fellow Americans", "And so, my fellow Americans"),
    ],
)
def test_non_speech_markers_are_dropped(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


@pytest.mark.timeout(120)
def test_beam_search_prompt_and_threads(whispercpp_engine: WhisperCppEngine) -> None:
    options = replace(OPTIONS, beam_size=5, threads=1, initial_prompt="President Kennedy.")
    segments = whispercpp_engine.transcribe(jfk_audio(), options)
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10, _text(segments)
    assert segments[-1].end_ms <= 11_000


@pytest.mark.timeout(120)
def test_auto_language_on_an_english_model(
    f16_engine: WhisperCppEngine, caplog: pytest.LogCaptureFixture
) -> None:
    segments = f16_engine.transcribe(jfk_audio(), replace(OPTIONS, language="auto"))
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.timeout(60)
def test_rejects_bad_options_and_audio(f16_engine: WhisperCppEngine) -> None:
    audio = jfk_audio()
    with pytest.raises(EngineError, match="unknown language"):
        f16_engine.transcribe(audio, replace(OPTIONS, language="xx"))
    with pytest.raises(EngineError, match="English-only"):
        f16_engine.transcribe(audio, replace(OPTIONS, language="de"))
    with pytest.raises(EngineError, match="NaN"):
        f16_engine.transcribe(np.full(SAMPLE_RATE, np.nan, dtype=np.float32), OPTIONS)
    with pytest.raises(EngineError, match="mono"):
        f16_engine.transcribe(np.zeros((2, SAMPLE_RATE), dtype=np.float32), OPTIONS)
    with pytest.raises(EngineError, match="float samples"):
        f16_engine.transcribe((audio * 32767).astype(np.int16), OPTIONS)
    assert f16_engine.transcribe(np.zeros(0, dtype=np.float32), OPTIONS) == []
    assert f16_engine.transcribe(np.zeros(800, dtype=np.float32), OPTIONS) == []


@pytest.mark.timeout(120)
def test_callback_error_stops_the_job_not_the_engine(f16_engine: WhisperCppEngine) -> None:
    def failing(segment: Segment) -> None:
        raise ValueError("subscriber went away")

    with pytest.raises(ValueError, match="subscriber went away"):
        f16_engine.transcribe(jfk_audio(), OPTIONS, failing)
    segments = f16_engine.transcribe(jfk_audio(), OPTIONS)
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10


@pytest.mark.timeout(120)
def test_other_threads_run_while_transcribing(f16_engine: WhisperCppEngine) -> None:
    ticks = 0
    done = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    started = time.monotonic()
    try:
        f16_engine.transcribe(jfk_audio(), OPTIONS)
    finally:
        done.set()
        ticker.join()
    elapsed = time.monotonic() - started
    # About 1000 ticks a second when the GIL is free; a handful if whisper.cpp held it.
    assert ticks > max(20, 0.05 * elapsed * 1000), f"{ticks} ticks in {elapsed:.2f} s"


@pytest.mark.timeout(120)
def test_whisper_cpp_logs_go_to_logging_not_the_terminal(
    model_files: dict[str, Path],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="voxwire.workers.engines.whispercpp")
    engine = create_engine("whispercpp", model_files["tiny.en"])
    try:
        engine.transcribe(jfk_audio(), OPTIONS)
        engine.transcribe(np.zeros(400, dtype=np.float32), OPTIONS)
    finally:
        engine.close()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert any("whisper_init" in record.getMessage() for record in caplog.records)


@pytest.mark.timeout(60)
def test_closed_engine_refuses_work(model_files: dict[str, Path]) -> None:
    engine = WhisperCppEngine(model_files["tiny.en-q8_0"])
    engine.close()
    engine.close()
    with pytest.raises(EngineError, match="closed"):
        engine.transcribe(jfk_audio(), OPTIONS)


def test_factory_knows_whispercpp() -> None:
    assert "whispercpp" in available()
    with pytest.raises(ConfigError, match="unknown engine") as err:
        create_engine("nope", "tiny.en")
    assert err.value.hint
    assert "whispercpp" in err.value.hint


LOAD_EACH = """
import json, sys
from voxwire.core.errors import VoxwireError
from voxwire.workers.engines import create_engine
from voxwire.workers.engines.whispercpp import WhisperCppEngine
results = {}
loaders = {"class": WhisperCppEngine, "factory": lambda p: create_engine("whispercpp", p)}
for path in sys.argv[1:]:
    for how, load in loaders.items():
        try:
            load(path).close()
            results[f"{path}|{how}"] = "loaded"
        except VoxwireError as exc:
            results[f"{path}|{how}"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(results))
"""


@pytest.mark.timeout(180)
def test_damaged_models_give_model_error_without_crashing(
    model_files: dict[str, Path], tmp_path: Path
) -> None:
    good = model_files["tiny.en"].read_bytes()
    unknown_ftype = bytearray(good)
    unknown_ftype[44:48] = (12345).to_bytes(4, "little")  # aborts a bare whisper.cpp
    damaged = {
        "truncated.bin": good[: len(good) * 2 // 3],  # a bare whisper.cpp loads it silently
        "header-only.bin": good[:30],
        "unknown-ftype.bin": bytes(unknown_ftype),
        "audio.wav": (
            Path(__file__).parents[3] / "shared/eval/audio/whispercpp_jfk.wav"
        ).read_bytes(),
    }
    paths = []
    for name, content in damaged.items():
        (tmp_path / name).write_bytes(content)
        paths.append(str(tmp_path / name))
    paths.append(str(tmp_path / "missing.bin"))
    run = run_isolated(LOAD_EACH, *paths, timeout=120)
    assert not run.timed_out
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(results) == 2 * len(paths)
    for key, outcome in results.items():
        assert outcome.startswith("ModelError: "), f"{key}: {outcome}"
        assert "voxwire models install" in outcome or "ggml" in outcome, outcome


def test_audio_ctx_fit_to_a_short_clip_keeps_the_text(whispercpp_engine: WhisperCppEngine) -> None:
    """audio_ctx cut to the clip's length (11 s -> 614 frames) reads JFK as well."""
    audio = jfk_audio()
    frames = -(-audio.size * 50 // SAMPLE_RATE) + 64
    segments = whispercpp_engine.transcribe(audio, replace(OPTIONS, audio_ctx=frames))
    assert wer(reference_text(JFK_ID), _text(segments)) <= 0.10, _text(segments)


def test_without_flash_attention_it_reads_the_same(whispercpp_engine: WhisperCppEngine) -> None:
    """Flash attention is on by default (1.47x faster in bench_engines.py); off reads alike."""
    engine = WhisperCppEngine(whispercpp_engine.model_path, flash_attn=False)
    try:
        text = _text(engine.transcribe(jfk_audio(), OPTIONS))
    finally:
        engine.close()
    assert wer(reference_text(JFK_ID), text) <= 0.10, text
