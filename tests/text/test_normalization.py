"""voxwire.text.normalization: case, punctuation, spans, percentages and numbers in words."""

from __future__ import annotations

import pytest

from voxwire.text.normalization import normalize


def words(text: str) -> list[str]:
    return [t.text for t in normalize(text)]


def test_normalize_lowercases_and_drops_punctuation() -> None:
    assert words("Hello, World! (Yes) — “quoted”…") == ["hello", "world", "yes", "quoted"]


def test_tokens_keep_their_character_spans() -> None:
    text = "  Well, twenty-one Cafés don't  close!"
    tokens = normalize(text)
    assert [text[t.start : t.end] for t in tokens] == [
        "Well",
        "twenty-one",
        "Cafés",
        "don't",
        "close",
    ]
    assert [t.text for t in tokens] == ["well", "21", "cafes", "dont", "close"]


@pytest.mark.parametrize(
    "text", ["twelve percent", "12%", "12 percent", "Twelve per cent.", "12 %", "twelve %"]
)
def test_percentages_normalize_alike(text: str) -> None:
    assert words(text) == ["12", "percent"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("one", ["1"]),
        ("forty-two", ["42"]),
        ("a hundred and five", ["105"]),
        ("thousand thoughts", ["1000", "thoughts"]),  # a scale word alone, as "a thousand"
        ("hundred", ["100"]),
        ("two thousand and five", ["2005"]),
        ("five hundred thousand", ["500000"]),
        ("three million two hundred", ["3000200"]),
        ("5 million", ["5000000"]),
        ("1,000 people", ["1000", "people"]),
        ("three point one four", ["3.14"]),
        ("3.14", ["3.14"]),
        ("in nineteen sixty one", ["in", "1961"]),
        ("in nineteen sixty-one", ["in", "1961"]),
        ("twenty twenty one", ["2021"]),
        ("nineteen oh five", ["1905"]),
        ("nineteen hundred", ["1900"]),
        ("one two three", ["1", "2", "3"]),
        ("zero seven", ["0", "7"]),
        ("the 12th at 5pm", ["the", "12th", "at", "5pm"]),
        ("a cat", ["a", "cat"]),
        ("and then", ["and", "then"]),
    ],
)
def test_numbers_in_words_become_digits(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_normalize_empty_and_punctuation_only() -> None:
    assert normalize("") == []
    assert normalize(" ... !? ") == []
