"""Make evaluation/redaction/spoken.jsonl: personal data spoken by espeak-ng and
written down by the platform's engine, with its real recognition errors.

Each item is a sentence that says a card number, a social security number, a
phone number, a bank account number, an email address, a street address or an
IBAN in one of the ways people say them (digit by digit in groups, in pairs, as
written numbers, with "oh" for zero), or a sentence with ordinary numbers and
nothing personal. It is spoken by several espeak-ng voices at several speeds
and transcribed by faster-whisper with tiny.en (int8 on the CPU, English,
greedy), as a worker does. A row holds what was said, what the engine wrote (``text``), the entity,
the span of ``text`` that holds it, and ``secret``: the character ranges of
``text`` that must not survive redaction (its digits and identifying words;
"dot", "at" and street types may). Sentences with nothing personal have no
entity and no secret.

    .venv/bin/python benchmarks/make_spoken_pii.py [--out evaluation/redaction/spoken.jsonl]

Needs espeak-ng (``scripts/services.sh speech``) and the tiny.en model; takes a
few minutes on two cores. The output is committed: tests read it, they do not
run the engine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.redaction.said import items, locate, secret, speak, takes  # noqa: E402
from evaluation.redaction.spoken import SPOKEN  # noqa: E402
from voxwire.workers.engine import EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402


def relabel(path: Path) -> None:
    """Recompute the spans and secrets of ``path`` (its texts stay)."""
    said = {i.sentence: i for i in items()}
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        item = said[row["said"]]
        span = locate(item, row["text"])
        row["span"] = list(span) if span else None
        row["secret"] = [list(s) for s in secret(row["text"], span, row["entity"])] if span else []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SPOKEN)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument(
        "--relabel", action="store_true", help="recompute spans and secrets of --out only"
    )
    args = parser.parse_args()
    if args.relabel:
        relabel(args.out)
        return
    engine = create_engine("faster-whisper", args.model)
    options = EngineOptions(language="en", threads=2)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for take in takes(items()):
            item, sentence = take.item, take.item.sentence
            audio = speak(sentence, take.voice, take.speed, Path(folder) / "said.wav")
            text = " ".join(s.text.strip() for s in engine.transcribe(audio, options)).strip()
            span = locate(item, text)
            row = {
                "text": text,
                "said": sentence,
                "entity": item.entity,
                "voice": take.voice,
                "speed": take.speed,
                "span": list(span) if span else None,
                "secret": [list(s) for s in secret(text, span, str(item.entity))] if span else [],
            }
            rows.append(row)
            print(f"{item.entity or '-':<15} {take.voice:<15} {text}", flush=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} items -> {args.out}")


if __name__ == "__main__":
    main()
