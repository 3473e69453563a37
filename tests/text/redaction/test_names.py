"""People's names (``redact_names``): found by the NER model where it is on, on the
names the eval recordings say as the engine writes them, nowhere else in the eval
references, and not at all where it is off (the default)."""

from __future__ import annotations

import pytest

from evaluation.corpus import eval_with_text
from evaluation.redaction.names import NAMES, score_names
from voxwire.text.names import CONTEXT_CHARS, NameFinder
from voxwire.text.redaction import Redactor, find_names, redactor
from voxwire_client.api import RedactMode
from voxwire_client.messages import WordData

pytestmark = pytest.mark.timeout(120)

HEARD = [  # what faster-whisper tiny.en writes for the eval recordings that say a name
    ("lhotse_ami_ES2011a_headset0_40-46s", "I'm Abigail Claflin. You can call me Abi."),
    ("pocketsphinx_librivox_0870", "And Mr. John Dashwood had then leisure to consider how much "
     "there might be prudently in his power to do for them."),
    ("leopard_ls_1272-128104-0000", "Mr. Quilter is the apostle of the middle classes and we "
     "are glad to welcome his gospel."),
]  # fmt: skip


@pytest.fixture(scope="module")
def names() -> NameFinder:
    return NameFinder()


def test_the_names_said_in_the_eval_set_are_found_and_nothing_else(names: NameFinder) -> None:
    def find(text: str) -> list[tuple[int, int]]:
        return [(n.start, n.end) for n in names.find(text)]

    heard = score_names(HEARD, find)
    assert (heard.name_words, heard.recall, heard.precision) == (6, 1.0, 1.0)
    others = [(i.id, i.text or "") for i in eval_with_text() if i.id not in NAMES]
    assert not score_names([(i, t.capitalize()) for i, t in others], find).findings


def test_a_name_is_redacted_in_text_and_words_only_where_names_are_on(names: NameFinder) -> None:
    text = "Hello, my name is Abigail Claflin and I call about my order."
    words = [WordData(word=f" {w}", start_ms=i * 300, end_ms=i * 300 + 250, probability=0.9)
             for i, w in enumerate(text.split())]  # fmt: skip
    redacted, out = Redactor(names=names).redact_segment(text, words, RedactMode.ENTITY)
    assert redacted == "Hello, my name is [PERSON] and I call about my order."
    assert [(w.word, w.start_ms, w.end_ms) for w in out if "PERSON" in w.word] == [
        ("[PERSON]", 1_200, 1_750)
    ]
    masked = Redactor(names=names).redact(text, RedactMode.MASK)
    assert "Abigail" not in masked and "******* *******" in masked
    assert Redactor().redact(text, RedactMode.ENTITY) == text  # off: the default


def test_the_process_redactor_finds_names_once_they_are_turned_on() -> None:
    said = "This is John Dashwood speaking."
    try:
        find_names(True)
        assert redactor().redact(said, RedactMode.ENTITY) == "This is [PERSON] speaking."
    finally:
        find_names(False)
    assert redactor().redact(said, RedactMode.ENTITY) == said


def test_a_name_begun_in_the_final_before_is_found_in_the_next(names: NameFinder) -> None:
    redactor_ = Redactor(names=names)
    first = "Hello, my name is John."
    second = "Smith, and I'm calling about my account."
    assert redactor_.redact(second, RedactMode.ENTITY) == second  # alone: no name in it
    before = Redactor.tail(first)
    assert before.said == first
    assert redactor_.redact(second, RedactMode.ENTITY, before=before) == (
        "[PERSON], and I'm calling about my account."
    )
    assert redactor_.redact(second[:20], RedactMode.ENTITY, partial=True, before=before).startswith(
        "[PERSON]"
    )  # its partials too
    # what the final before said is not found again: it was redacted with its own final
    assert names.find("and I'm calling.", before="This is John Smith") == []


def test_the_text_before_is_the_end_of_the_finals_so_far() -> None:
    tail = Redactor.tail("Quilter.", Redactor.tail("My name is Peter"))
    assert tail.said == "My name is Peter Quilter."
    long = Redactor.tail("word " * 100)
    assert len(long.said) <= CONTEXT_CHARS and long.said.startswith("word")


def test_places_are_found_only_where_they_are_asked_for() -> None:
    text = "I moved from Leeds to Springfield, Illinois last year, John said."
    places = NameFinder(names=False, places=True)
    assert places.entities == {"LOCATION"}
    assert Redactor(names=places).redact(text, RedactMode.ENTITY) == (
        "I moved from [LOCATION] to [LOCATION], [LOCATION] last year, John said."
    )
    both = NameFinder(places=True)
    assert Redactor(names=both).redact(text, RedactMode.ENTITY) == (
        "I moved from [LOCATION] to [LOCATION], [LOCATION] last year, [PERSON] said."
    )
