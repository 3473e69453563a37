"""PII redaction: precision and recall on the labelled and spoken sets, and the cost per final.

Precision and recall per entity type on evaluation/redaction/labelled.jsonl
(written text), and on evaluation/redaction/spoken.jsonl (personal data said by
espeak-ng voices and written by the engine, benchmarks/make_spoken_pii.py) for
this redactor and for the one of ``--baseline`` (a git revision, default
``main``; its redaction.py and number_runs.py are loaded from git). ``--missed``
lists the spoken items missed, with what was said. On the spoken set an item is
recalled when none of its secret characters survive; a finding is right when
it lies on what was said. Then false positives on the ../shared/eval reference
transcripts (real speech with nothing personal in it) and the time to redact a
final, on the eval transcripts and the labelled texts, against the baseline
measured in the same run: normalising the same text (what matching already
does to every final).

    .venv/bin/python benchmarks/bench_redaction.py [--rounds 20] [--baseline main] [--missed]
        [--spoken spoken-base.jsonl]

``--spoken`` scores another spoken set, e.g. one written by base
(``make_spoken_pii.py --model base --out spoken-base.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.redaction.labelled import labelled, scores  # noqa: E402
from evaluation.redaction.spoken import SPOKEN, spoken_scores  # noqa: E402
from voxwire.text.normalization import normalize  # noqa: E402
from voxwire.text.redaction import Redactor  # noqa: E402
from voxwire_client.api import RedactMode  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "manifest.jsonl"


BASELINE_MODULES = ("number_runs", "heard", "redaction")
"""The modules that make the redactor, loaded from the baseline revision in this
order (a module the revision does not have is skipped)."""
PACKAGES = ("text", "core")
"""Where the revision may hold them (voxwire.text since the text package was split
out of voxwire.core)."""


def baseline(revision: str) -> Any:
    """The Redactor of ``revision``: its redaction.py and the modules it
    builds on, each loaded from git with the revision's modules before it."""
    loaded: dict[str, types.ModuleType] = {}
    for name in BASELINE_MODULES:
        for package in PACKAGES:
            shown = subprocess.run(
                ["git", "show", f"{revision}:src/voxwire/{package}/{name}.py"],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            if not shown.returncode:
                break
        else:
            continue
        module = types.ModuleType(f"{name}_at_{revision}")
        sys.modules[module.__name__] = module
        names = [f"voxwire.{p}.{m}" for p in PACKAGES for m in loaded]
        current = {n: sys.modules.get(n) for n in names}
        sys.modules.update({f"voxwire.{p}.{m}": mod for p in PACKAGES for m, mod in loaded.items()})
        try:
            exec(compile(shown.stdout, f"{revision}:{name}.py", "exec"), module.__dict__)
        finally:
            for n, mod in current.items():
                if mod is None:
                    del sys.modules[n]
                else:
                    sys.modules[n] = mod
        loaded[name] = module
    return loaded["redaction"].Redactor()


def tables(name: str, find: Callable[[str], Any], missed: bool, spoken: Path) -> None:
    by_entity, total = scores(find)
    print(f"\n{name}: labelled set (written)")
    print(f"{'entity':<15} {'precision':>9} {'recall':>7}")
    for entity, s in sorted(by_entity.items()):
        print(f"{entity:<15} {s.precision:>9.2f} {s.recall:>7.2f}")
    print(f"{'all':<15} {total.precision:>9.2f} {total.recall:>7.2f}")
    spoken_by, spoken_total, not_hidden = spoken_scores(find, spoken)
    print(f"\n{name}: spoken set (espeak-ng, then the engine)")
    print(f"{'entity':<15} {'said':>5} {'recall':>7} {'found':>6} {'precision':>9}")
    for entity, t in sorted(spoken_by.items()):
        print(f"{entity:<15} {t.items:>5} {t.recall:>7.2f} {t.findings:>6} {t.precision:>9.2f}")
    print(
        f"{'all':<15} {spoken_total.items:>5} {spoken_total.recall:>7.2f} "
        f"{spoken_total.findings:>6} {spoken_total.precision:>9.2f}"
    )
    speech = [json.loads(line)["text"] for line in EVAL.read_text().splitlines()]
    speech = [t for t in speech if t]
    found = [find(t) for t in speech]
    untouched = sum(not f for f in found) / len(speech)
    print(
        f"\n{name}: eval transcripts {len(speech)}, false positives "
        f"{sum(len(f) for f in found)}, transcripts untouched {untouched:.2f}"
    )
    for item in not_hidden if missed else ():
        print(f"  missed {item.entity:<15} {item.text[:110]!r}")
        print(f"         {'said':<15} {item.said[:110]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--baseline", default="main", help="a git revision to compare with")
    parser.add_argument("--missed", action="store_true", help="print the spoken items missed")
    parser.add_argument(
        "--spoken", type=Path, default=SPOKEN, help="another spoken set (make_spoken_pii.py --out)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    redactor = Redactor()
    redactor.find("warm up 4111 1111 1111 1111")
    print(f"recognizers loaded in {time.perf_counter() - started:.2f} s")

    before = baseline(args.baseline) if args.baseline else None
    if before is not None:
        tables(f"before ({args.baseline})", before.find, args.missed, args.spoken)
    tables("now", redactor.find, args.missed, args.spoken)
    speech = [json.loads(line)["text"] for line in EVAL.read_text().splitlines()]
    speech = [t for t in speech if t]

    texts = speech + [item.text for item in labelled()]
    words = sum(len(t.split()) for t in texts)
    timings = {}
    runs: list[tuple[str, Callable[[str], Any]]] = [
        ("normalize (baseline)", lambda t: normalize(t)),
        ("redact final", lambda t: redactor.redact(t, RedactMode.ENTITY)),
        ("redact partial", lambda t: redactor.redact(t, RedactMode.ENTITY, partial=True)),
    ]
    if before is not None:
        runs += [
            (f"final ({args.baseline})", lambda t: before.redact(t, RedactMode.ENTITY)),
            (
                f"partial ({args.baseline})",
                lambda t: before.redact(t, RedactMode.ENTITY, partial=True),
            ),
        ]
    for name, run in runs:
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
