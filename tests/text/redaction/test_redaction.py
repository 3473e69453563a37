"""PII redaction: the labelled set's precision and recall, the modes, partials,
and transcripts that never hold what was redacted."""

from __future__ import annotations

import json
import logging
import re

import pytest
from prometheus_client import REGISTRY

from evaluation.corpus import EVAL_DIR
from evaluation.redaction.labelled import labelled, scores
from voxwire.text.redaction import Redactor
from voxwire_client.api import RedactMode

MIN_PRECISION = MIN_RECALL = 0.9


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def test_the_labelled_set_is_found_with_high_precision_and_recall(redactor: Redactor) -> None:
    by_entity, total = scores(redactor.find)
    for entity, s in sorted(by_entity.items()):
        print(f"{entity:<15} precision {s.precision:.2f} recall {s.recall:.2f}")
    print(f"{'all':<15} precision {total.precision:.2f} recall {total.recall:.2f}")
    assert total.precision >= MIN_PRECISION and total.recall >= MIN_RECALL


def test_each_mode(redactor: Redactor) -> None:
    text = "Card 4111 1111 1111 1111, mail jane dot doe at example dot com."
    assert redactor.redact(text, RedactMode.OFF) == text
    assert redactor.redact(text, RedactMode.MASK) == (
        "Card **** **** **** ****, mail **** *** *** ** ******* *** ***."
    )
    assert redactor.redact(text, RedactMode.ENTITY) == "Card [CREDIT_CARD], mail [EMAIL_ADDRESS]."


def test_a_partial_never_shows_a_digit_the_final_redacts(redactor: Redactor) -> None:
    """Every prefix of every labelled text, as a partial: no digit of a span the
    whole text has redacted is shown, written or spoken."""
    for item in labelled():
        if not item.expect:
            continue
        for end in [m.end() for m in re.finditer(r"\S+", item.text)]:
            prefix = item.text[:end]
            shown = redactor.redact(prefix, RedactMode.MASK, partial=True)
            assert len(shown) == len(prefix)
            for _entity, start, stop in item.expect:
                for word in re.finditer(r"\w+", prefix[start:stop]):
                    at = start + word.start()
                    spoken = _is_number(word.group())
                    if spoken and shown[at : at + len(word.group())] == word.group():
                        pytest.fail(f"{prefix!r} shows {word.group()!r}: {shown!r}")


def _is_number(word: str) -> bool:
    names = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "oh",
    ]
    return any(c.isdigit() for c in word) or word.lower() in names


def test_partials_redact_more_than_finals(redactor: Redactor) -> None:
    partial = redactor.redact("my email is jane dot doe at", RedactMode.ENTITY, partial=True)
    assert "jane" not in partial and "doe" not in partial
    assert redactor.redact("in 1961 he said", RedactMode.ENTITY) == "in 1961 he said"
    assert "1961" not in redactor.redact("in 1961 he said", RedactMode.ENTITY, partial=True)


def _redactions(entity: str) -> float:
    return REGISTRY.get_sample_value("voxwire_redactions_total", {"entity": entity}) or 0.0


def test_redactions_are_counted_and_never_logged(
    redactor: Redactor, caplog: pytest.LogCaptureFixture
) -> None:
    before = _redactions("CREDIT_CARD")
    with caplog.at_level(logging.DEBUG):
        redactor.redact("pay with 4111 1111 1111 1111", RedactMode.ENTITY)
    assert _redactions("CREDIT_CARD") == before + 1
    assert "4111" not in caplog.text


def test_nothing_in_the_eval_transcripts_is_taken_for_personal_data(redactor: Redactor) -> None:
    """Real speech without personal data: every finding would be a false positive."""
    texts = [
        json.loads(line)["text"] for line in (EVAL_DIR / "manifest.jsonl").read_text().splitlines()
    ]
    found = {t: redactor.find(t) for t in texts if t}
    assert len(found) > 20
    assert {t: f for t, f in found.items() if f} == {}
