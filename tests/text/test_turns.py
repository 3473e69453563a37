"""When a transcript ends a sentence (the evidence for an early live final)."""

from __future__ import annotations

import pytest

from voxwire.text.turns import sounds_finished


@pytest.mark.parametrize(
    "text",
    [
        "That is all for today.",
        "Can you confirm the card number?",
        "Yes!",
        'He said "go home."',
        "Thank you.",
        "Where to?",  # a question may end on a preposition
        "  It was late.  ",
    ],
)
def test_a_finished_sentence(text: str) -> None:
    assert sounds_finished(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "and then we",
        "I went to the store,",
        "So I went to the.",  # Whisper closes audio that stops with a full stop
        "My name is, um.",
        "It was the best of times and.",
        "Well...",
        "Well…",
        "because I.",
    ],
)
def test_a_sentence_that_goes_on(text: str) -> None:
    assert not sounds_finished(text)


def test_other_languages_are_judged_by_their_punctuation() -> None:
    assert sounds_finished("Ich gehe nach Hause.", "de")
    assert sounds_finished("I went to the.", "de")  # the English word list is not used
    assert not sounds_finished("Ich gehe nach,", "de")
    assert sounds_finished("我回家了。", "zh")
