"""Offline engine table: speed (RTFx) and accuracy (WER) per engine and setting.

Every eval recording with a reference transcript (../shared/eval), decoded
once, transcribed whole by each engine and setting in turn, one at a time,
with 2 threads (this machine's cores) unless a row says otherwise. RTFx is
seconds of audio per second of compute (higher is faster); the first row
(whisper.cpp f16, greedy, without flash attention) is the baseline of the
ratio column; each later whisper.cpp row changes one lever from it (the
VAD-gated row adds the gate to the flash-attention default). WER is over the
whole corpus, after the same normalisation the tests use. Each setting is run ``--rounds``
times and the fastest round counts (the machine is noisy).

    .venv/bin/python benchmarks/bench_engines.py [--rounds 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.corpus import corpus_wer, eval_with_text  # noqa: E402
from voxwire.audio.decoding import decode  # noqa: E402
from voxwire.workers.engine import EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402
from voxwire.workers.stream.endpointing import SegmentFinal, endpoint  # noqa: E402
from voxwire.workers.vad import SileroVad, speech_probabilities  # noqa: E402


@dataclass(frozen=True)
class Setting:
    label: str
    engine: str
    model: str
    beam_size: int = 1
    kwargs: tuple[tuple[str, object], ...] = ()
    threads: int = 2
    scaled_ctx: bool = False
    """whisper.cpp's audio_ctx cut to each clip's length (clips of at most 30 s)."""
    vad_gate: bool = False
    """Only the speech the VAD finds (the streaming endpointer's segments, 0.2 s of
    margin), joined, is transcribed; the VAD's time is counted."""

    def options(self, audio: object) -> EngineOptions:
        ctx = 0
        if self.scaled_ctx and len(audio) <= 30 * 16_000:  # type: ignore[arg-type]
            ctx = min(1500, -(-len(audio) * 50 // 16_000) + 64)  # type: ignore[arg-type]
        return EngineOptions(
            language="en", beam_size=self.beam_size, threads=self.threads, audio_ctx=ctx
        )


NO_FLASH = (("flash_attn", False),)
SETTINGS = [
    Setting("whisper.cpp f16, greedy", "whispercpp", "tiny.en", kwargs=NO_FLASH),
    Setting("whisper.cpp f16, beam 2", "whispercpp", "tiny.en", beam_size=2, kwargs=NO_FLASH),
    Setting("whisper.cpp q8_0, greedy", "whispercpp", "tiny.en-q8_0", kwargs=NO_FLASH),
    Setting("whisper.cpp q5_0, greedy", "whispercpp", "tiny.en-q5_0", kwargs=NO_FLASH),
    Setting("whisper.cpp f16, 1 thread", "whispercpp", "tiny.en", threads=1, kwargs=NO_FLASH),
    Setting("whisper.cpp f16, flash attention (default)", "whispercpp", "tiny.en"),
    Setting(
        "whisper.cpp f16, audio_ctx fit", "whispercpp", "tiny.en", scaled_ctx=True, kwargs=NO_FLASH
    ),
    Setting("whisper.cpp f16, flash, VAD-gated", "whispercpp", "tiny.en", vad_gate=True),
    Setting("faster-whisper int8, greedy", "faster-whisper", "tiny.en"),
    Setting("faster-whisper int8, VAD-gated", "faster-whisper", "tiny.en", vad_gate=True),
    Setting("faster-whisper int8, beam 2", "faster-whisper", "tiny.en", beam_size=2),
    Setting(
        "faster-whisper float32, greedy",
        "faster-whisper",
        "tiny.en",
        kwargs=(("compute_type", "float32"),),
    ),
    Setting("faster-whisper int8, 1 thread", "faster-whisper", "tiny.en", kwargs=(("threads", 1),)),
]


def speech_only(audio: np.ndarray, margin_ms: int = 200) -> np.ndarray:
    """The spans of ``audio`` the streaming endpointer calls speech, widened by
    ``margin_ms`` on each side and joined (overlaps merged)."""
    vad = SileroVad()
    spans: list[tuple[int, int]] = []
    for event in endpoint(speech_probabilities(vad, audio), end_ms=len(audio) * 1000 // 16_000):
        if isinstance(event, SegmentFinal):
            start = max(0, (event.start_ms - margin_ms) * 16)
            end = min(len(audio), (event.end_ms + margin_ms) * 16)
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
    if not spans:
        return audio[:0]
    return np.concatenate([audio[a:b] for a, b in spans])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    items = eval_with_text()
    audios = [decode(i.path.read_bytes(), max_seconds=600).samples for i in items]
    refs = [i.text or "" for i in items]
    audio_s = sum(len(a) for a in audios) / 16_000
    print(f"{len(items)} recordings, {audio_s:.0f} s of audio, {args.rounds} rounds each\n")
    rows = []
    for setting in SETTINGS:
        engine = create_engine(setting.engine, setting.model, **dict(setting.kwargs))
        engine.transcribe(audios[0], setting.options(audios[0]))  # warm up
        best, hyps = float("inf"), []
        for _ in range(args.rounds):
            started = time.perf_counter()
            hyps = []
            for audio in audios:
                clip = speech_only(audio) if setting.vad_gate else audio
                segments = engine.transcribe(clip, setting.options(clip)) if len(clip) else []
                hyps.append(" ".join(s.text for s in segments))
            best = min(best, time.perf_counter() - started)
        engine.close()
        rows.append(
            {"setting": setting.label, "rtfx": audio_s / best, "wer": corpus_wer(refs, hyps)}
        )
        print(f"  {setting.label}: RTFx {audio_s / best:.1f}", flush=True)
    base = rows[0]["rtfx"]
    print(f"\n{'engine and setting':<32} {'RTFx':>6} {'vs default':>10} {'WER':>6}")
    for row in rows:
        print(
            f"{row['setting']:<32} {row['rtfx']:>6.1f} {row['rtfx'] / base:>9.2f}x "
            f"{row['wer']:>6.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
