"""People's names (the ``redact_names`` setting): precision and recall on the
names said in the eval set, false positives on everything else, and the cost per final.

The eval recordings with a reference (../shared/eval) are scored twice: their
reference transcripts as written (LibriSpeech upper case, pocketsphinx and MFA
lower case, others sentence case) and what faster-whisper tiny.en writes for
them (greedy, the platform's default engine). The names said in them are
labelled in evaluation/redaction/names.py (three recordings, six name words);
every other finding is a false positive. The spoken and labelled redaction
sets (evaluation/redaction/*.jsonl) say no name: a finding outside their
labelled personal data is a false positive (one on it, e.g. the "m dot garcia"
of an email address, is redacted anyway). The cost is the time the redactor
takes for a final with names on minus with them off, on the engine's
transcripts, fastest of ``--rounds``.

    .venv/bin/python benchmarks/bench_names.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.corpus import eval_with_text  # noqa: E402
from evaluation.redaction.labelled import labelled  # noqa: E402
from evaluation.redaction.names import NameScore, score_names  # noqa: E402
from evaluation.redaction.spoken import spoken  # noqa: E402
from voxwire.audio.decoding import decode  # noqa: E402
from voxwire.text.names import NameFinder  # noqa: E402
from voxwire.text.redaction import Redactor  # noqa: E402
from voxwire.workers.engine import EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402
from voxwire_client.api import RedactMode  # noqa: E402


def transcripts() -> list[tuple[str, str]]:
    """What faster-whisper tiny.en writes for each eval recording with a reference."""
    engine = create_engine("faster-whisper", "tiny.en")
    out = []
    for item in eval_with_text():
        audio = decode(item.path.read_bytes()).samples
        segments = engine.transcribe(audio, EngineOptions(language="en", threads=2))
        out.append((item.id, " ".join(s.text.strip() for s in segments)))
    engine.close()
    return out


def _row(label: str, score: NameScore) -> None:
    print(
        f"{label:<34} {score.name_words:>5} {score.recall:>7.2f} {score.findings:>8} "
        f"{score.precision:>9.2f}  {score.false_positives}"
    )


def _cost_ms(texts: list[str], rounds: int) -> tuple[float, float]:
    """ms per final of redacting ``texts`` without and with names, fastest round."""
    without, with_names = Redactor(), Redactor(names=NameFinder())
    best = []
    for redactor in (without, with_names):
        fastest = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            for text in texts:
                redactor.redact(text, RedactMode.ENTITY)
            fastest = min(fastest, time.perf_counter() - started)
        best.append(1000 * fastest / len(texts))
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    finder = NameFinder()
    print(f"names model loaded in {time.perf_counter() - started:.2f} s")
    find = lambda text: [(n.start, n.end) for n in finder.find(text)]  # noqa: E731
    written = [(item.id, item.text or "") for item in eval_with_text()]
    heard = transcripts()
    print(f"\n{'texts':<34} {'names':>5} {'recall':>7} {'findings':>8} {'precision':>9}  false")
    _row("eval references as written", score_names(written, find))
    _row("eval, tiny.en's transcripts", score_names(heard, find))
    others = [(s.text, [s.span] if s.span else []) for s in spoken()]
    others += [(t.text, [(a, b) for _, a, b in t.expect]) for t in labelled()]
    on_data, elsewhere = [], []
    for text, spans in others:
        for start, end in find(text):
            inside = any(a < end and start < b for a, b in spans)
            (on_data if inside else elsewhere).append(text[start:end])
    print(
        f"redaction sets ({len(others)} texts, no name said): {len(elsewhere)} findings outside "
        f"their personal data {elsewhere}, {len(on_data)} on it {on_data}"
    )
    off, on = _cost_ms([text for _, text in heard], args.rounds)
    print(f"\nredacting a final: {off:.2f} ms without names, {on:.2f} ms with (+{on - off:.2f} ms)")
    for item_id, text in heard:
        if any(n for n in finder.find(text)):
            print(f"  {item_id}: {text!r} -> {[text[n.start : n.end] for n in finder.find(text)]}")


if __name__ == "__main__":
    main()
