"""What the file loop guard (:mod:`voxwire.workers.files.loop_guard`) buys and costs.

For each engine (whisper.cpp and faster-whisper, tiny.en by default), the file
path's decode (:func:`~voxwire.workers.files.skipped_speech.transcribe_heard`)
runs without the guard and with it, on:

- the looping call (:func:`evaluation.degraded.looping_call`: four eval
  recordings through a bad 8 kHz mu-law line, on which both engines loop at
  temperature 0): WER, seconds, windows decoded again;
- every eval recording with a reference (``../shared/eval``), clean (16 kHz) and
  as 8 kHz G.711 mu-law (band-limited down, coded, band-limited back up): WER.

With ``--ladder``, whisper.cpp's looping call runs a third time with the guard
and whisper.cpp's own temperature ladder left on during the redecodes
(``LoopGuard(engine_fallback=True)``), the combination the guard avoids.

    .venv/bin/python benchmarks/bench_loops.py [--engines whispercpp,faster-whisper]
        [--model tiny.en] [--ladder] [--no-eval] [--no-call] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.corpus import corpus_wer, eval_with_text
from evaluation.degraded import looping_call
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.resample import resample
from voxwire.core.metrics import FILE_LOOPS_REDECODED
from voxwire.models import registry
from voxwire.workers.engine import Engine, EngineOptions, Segment
from voxwire.workers.engines import create_engine
from voxwire.workers.files.loop_guard import LoopGuard
from voxwire.workers.files.skipped_speech import transcribe_heard

Wrap = Callable[[Engine], Engine]
VARIANTS: dict[str, Wrap] = {
    "no guard": lambda engine: engine,
    "guard": LoopGuard,
}
LADDER: dict[str, Wrap] = {
    "guard, whisper.cpp ladder on": lambda engine: LoopGuard(engine, engine_fallback=True),
}


def file_text(engine: Engine, audio: Audio) -> str:
    """``audio`` decoded as the file path decodes it."""
    segments: list[Segment] = []
    transcribe_heard(engine, audio, EngineOptions(), segments.append)
    return " ".join(s.text for s in segments)


def mulaw_8k(samples: Audio) -> Audio:
    """``samples`` (16 kHz) as an 8 kHz mu-law call delivers them, at 16 kHz."""
    narrow = resample(samples, SAMPLE_RATE, 8_000)
    coded = g711_to_float32(float32_to_g711(narrow, Law.MULAW), Law.MULAW)
    return resample(coded, 8_000, SAMPLE_RATE)


def redecoded() -> float:
    return float(FILE_LOOPS_REDECODED._value.get())


def on_looping_call(engine: Engine, variants: dict[str, Wrap]) -> dict[str, dict[str, float]]:
    call = looping_call()
    out = {}
    for name, wrap in variants.items():
        before, started = redecoded(), time.perf_counter()
        text = file_text(wrap(engine), call.audio)
        seconds = time.perf_counter() - started
        out[name] = {
            "wer": corpus_wer([call.reference], [text]),
            "seconds": round(seconds, 1),
            "redecoded": redecoded() - before,
        }
        print(f"  looping call, {name}: {out[name]}\n    {text[:300]}", file=sys.stderr)
    return out


def on_eval_set(engine: Engine) -> dict[str, float]:
    items = eval_with_text()
    refs = [str(item.text) for item in items]
    clean = [decode(item.path.read_bytes()).samples for item in items]
    inputs = {"clean": clean, "8 kHz mu-law": [mulaw_8k(s) for s in clean]}
    out = {}
    for condition, audios in inputs.items():
        for name, wrap in VARIANTS.items():
            before = redecoded()
            hyps = [file_text(wrap(engine), audio) for audio in audios]
            key = f"{condition}, {name}"
            out[key] = corpus_wer(refs, hyps)
            out[f"{key}: redecoded"] = redecoded() - before
            print(f"  eval set, {key}: WER {out[key]:.4f}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="whispercpp,faster-whisper")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--ladder", action="store_true")
    parser.add_argument("--no-eval", action="store_true")
    parser.add_argument("--no-call", action="store_true", help="the eval set only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    registry.resolve(args.model)  # whisper.cpp's file is built on first use
    results: dict[str, dict[str, object]] = {}
    for name in args.engines.split(","):
        engine = create_engine(name, args.model)
        variants = VARIANTS | (LADDER if args.ladder and name == "whispercpp" else {})
        results[name] = {}
        if not args.no_call:
            results[name]["looping call"] = on_looping_call(engine, variants)
        if not args.no_eval:
            results[name]["eval set"] = on_eval_set(engine)
        engine.close()
    for name, found in results.items():
        print(f"{name}:")
        for what, figures in found.items():
            print(f"  {what}:")
            for key, value in figures.items():  # type: ignore[attr-defined]
                print(f"    {key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
