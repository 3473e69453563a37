"""PII redaction: precision and recall on the labelled set, and the cost per final.

Precision and recall per entity type on tests/core/redaction/labelled.jsonl, and
false positives on the ../shared/eval reference transcripts (real speech with
nothing personal in it). Then the time to redact a final, on the eval
transcripts and the labelled texts, against the baseline measured in the same
run: normalising the same text (what matching already does to every final).

    .venv/bin/python benchmarks/bench_redaction.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.core.redaction.labelled import labelled, scores  # noqa: E402
from voxwire.core.normalization import normalize  # noqa: E402
from voxwire.core.redaction import Redactor  # noqa: E402
from voxwire_client.api import RedactMode  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "manifest.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    redactor = Redactor()
    redactor.find("warm up 4111 1111 1111 1111")
    print(f"recognizers loaded in {time.perf_counter() - started:.2f} s")

    by_entity, total = scores(redactor.find)
    print(f"\n{'entity':<15} {'precision':>9} {'recall':>7}")
    for entity, s in sorted(by_entity.items()):
        print(f"{entity:<15} {s.precision:>9.2f} {s.recall:>7.2f}")
    print(f"{'all':<15} {total.precision:>9.2f} {total.recall:>7.2f}")

    speech = [json.loads(line)["text"] for line in EVAL.read_text().splitlines()]
    speech = [t for t in speech if t]
    false_positives = sum(len(redactor.find(t)) for t in speech)
    print(f"\neval transcripts: {len(speech)}, false positives: {false_positives}")

    texts = speech + [item.text for item in labelled()]
    words = sum(len(t.split()) for t in texts)
    timings = {}
    for name, run in (
        ("normalize (baseline)", lambda t: normalize(t)),
        ("redact final", lambda t: redactor.redact(t, RedactMode.ENTITY)),
        ("redact partial", lambda t: redactor.redact(t, RedactMode.ENTITY, partial=True)),
    ):
        started = time.perf_counter()
        for _ in range(args.rounds):
            for text in texts:
                run(text)
        timings[name] = (time.perf_counter() - started) / (args.rounds * len(texts)) * 1000
    base = timings["normalize (baseline)"]
    print(f"\n{len(texts)} texts, {words / len(texts):.0f} words each on average")
    for name, ms in timings.items():
        print(f"{name:<22} {ms:7.3f} ms per text  ({ms / base:5.1f}x the baseline)")


if __name__ == "__main__":
    main()
