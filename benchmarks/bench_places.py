"""Places (the ``redact_places`` setting, ``LOCATION``): precision and recall on
places said aloud, false positives where none is said, the cost per final, and
what reading the final before costs the names model.

- A spoken set: the sentences of evaluation/redaction/places.py (22 that say
  places, 6 that do not) said by two espeak-ng voices each and written by
  faster-whisper tiny.en (greedy, the platform's default engine), and the same
  sentences as written. Scored with the model's ``GPE``, ``LOC`` and ``FAC``
  (what the platform finds) and without ``FAC`` (buildings, airports, roads).
- The eval set (../shared/eval): its references as written and tiny.en's
  transcripts of them. No place is said there: every finding is a false positive.
- The redaction sets (evaluation/redaction/*.jsonl): no place is said either;
  findings outside their labelled personal data are false positives.
- The cost: ms per final of redaction without the model, with places, with
  names, with both (one run of the model), and with names read after the final
  before (the live path), on tiny.en's transcripts; fastest of ``--rounds``.

    .venv/bin/python benchmarks/bench_places.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_names import transcripts  # noqa: E402
from evaluation.corpus import eval_with_text  # noqa: E402
from evaluation.redaction.labelled import labelled  # noqa: E402
from evaluation.redaction.names import NameScore, Span  # noqa: E402
from evaluation.redaction.places import PLACES, score_places  # noqa: E402
from evaluation.redaction.said import SPEEDS, VOICES, speak  # noqa: E402
from evaluation.redaction.spoken import spoken  # noqa: E402
from voxwire.text.names import MODEL, PLACE_LABELS, NameFinder  # noqa: E402
from voxwire.text.redaction import NO_TAIL, Redactor  # noqa: E402
from voxwire.workers.engine import EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402
from voxwire_client.api import RedactMode  # noqa: E402

TAKES = 2
Find = Callable[[str], list[Span]]


def heard_places() -> list[tuple[Sequence[str], str]]:
    """What tiny.en writes for each sentence of PLACES, in TAKES voices and speeds."""
    engine = create_engine("faster-whisper", "tiny.en")
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for n, (sentence, patterns) in enumerate(PLACES):
            for take in range(TAKES):
                voice = VOICES[(n * 5 + take * 3) % len(VOICES)]
                speed = SPEEDS[(n + take) % len(SPEEDS)]
                audio = speak(sentence, voice, speed, Path(folder) / "said.wav")
                segments = engine.transcribe(audio, EngineOptions(language="en", threads=2))
                out.append((patterns, " ".join(s.text.strip() for s in segments)))
    engine.close()
    return out


def _finders() -> dict[str, Find]:
    """The platform's places finder, and one without the model's FAC label."""
    import spacy

    places = NameFinder(names=False, places=True)
    nlp = spacy.load(MODEL, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"])
    labels = set(PLACE_LABELS) - {"FAC"}

    def without_fac(text: str) -> list[Span]:
        return [(e.start_char, e.end_char) for e in nlp(text).ents if e.label_ in labels]

    return {
        "GPE+LOC+FAC": lambda text: [(p.start, p.end) for p in places.find(text)],
        "GPE+LOC": without_fac,
    }


def _row(label: str, score: NameScore) -> None:
    print(
        f"{label:<44} {score.name_words:>6} {score.recall:>7.2f} {score.findings:>8} "
        f"{score.precision:>9.2f}  {score.false_positives}"
    )


def _cost_ms(texts: list[str], rounds: int) -> dict[str, float]:
    """ms per final of redacting ``texts`` (in order, as finals) with each finder."""
    redactors = {
        "no model": (Redactor(), False),
        "places": (Redactor(names=NameFinder(names=False, places=True)), False),
        "names": (Redactor(names=NameFinder()), False),
        "names and places": (Redactor(names=NameFinder(places=True)), False),
        "names and places, final before read": (Redactor(names=NameFinder(places=True)), True),
    }
    out = {}
    for label, (redactor, carried) in redactors.items():
        fastest = float("inf")
        for _ in range(rounds):
            before = NO_TAIL
            started = time.perf_counter()
            for text in texts:
                redactor.redact(text, RedactMode.ENTITY, before=before)
                before = Redactor.tail(text, before) if carried else NO_TAIL
            fastest = min(fastest, time.perf_counter() - started)
        out[label] = 1000 * fastest / len(texts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    heard = heard_places()
    written = [(patterns, sentence) for sentence, patterns in PLACES]
    evals = transcripts()
    references = [((), item.text or "") for item in eval_with_text()]
    others = [(s.text, [s.span] if s.span else []) for s in spoken()]
    others += [(t.text, [(a, b) for _, a, b in t.expect]) for t in labelled()]
    print(f"\n{'texts':<44} {'places':>6} {'recall':>7} {'findings':>8} {'precision':>9}  false")
    for label, find in _finders().items():
        _row(f"spoken places, tiny.en ({label})", score_places(heard, find))
        _row(f"spoken places, as written ({label})", score_places(written, find))
        _row(
            f"eval, tiny.en's transcripts ({label})",
            score_places([((), t) for _, t in evals], find),
        )
        _row(f"eval references as written ({label})", score_places(references, find))
        on_data, elsewhere = [], []
        for text, spans in others:
            for start, end in find(text):
                inside = any(a < end and start < b for a, b in spans)
                (on_data if inside else elsewhere).append(text[start:end])
        print(
            f"  redaction sets ({len(others)} texts, {label}): {len(elsewhere)} findings outside "
            f"their personal data {elsewhere}, {len(on_data)} on it {on_data}"
        )
    texts = [t for _, t in heard] + [t for _, t in evals]
    costs = _cost_ms(texts, args.rounds)
    print(f"\nredacting a final ({len(texts)} transcripts, fastest of {args.rounds}):")
    for label, ms in costs.items():
        print(f"  {label:<40} {ms:6.2f} ms  (+{ms - costs['no model']:.2f})")


if __name__ == "__main__":
    main()
