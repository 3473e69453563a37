"""voxwire.text.matching: exact and fuzzy prompt matches, timing and highlights."""

from __future__ import annotations

import html
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxwire.text.matching import Prompt, PromptMatcher
from voxwire_client.messages import MatchData

JFK = (
    " And so my fellow Americans, ask not what your country can do for you,"
    " ask what you can do for your country."
)


def match_one(prompt: str, text: str, **options: object) -> list[MatchData]:
    matcher = PromptMatcher([Prompt(id="p", text=prompt, **options)])  # type: ignore[arg-type]
    return matcher.match("seg-1", text, 1_000, 5_000)


# --- matching -----------------------------------------------------------------------------------


def test_exact_match_ignores_case_and_punctuation() -> None:
    [hit] = match_one("ASK NOT!", JFK)
    assert hit.score == 1.0
    assert hit.text == "ask not"
    assert hit.prompt == "ASK NOT!"
    assert hit.prompt_id == "p"
    assert hit.segment_ids == ("seg-1",)


def test_match_across_punctuation_in_the_segment() -> None:
    [hit] = match_one("fellow americans ask", JFK)
    assert hit.score == 1.0
    assert hit.text == "fellow Americans, ask"


@pytest.mark.parametrize(
    ("prompt", "text", "matched"),
    [
        ("twelve percent", "Prices rose 12% last year.", "12%"),
        ("12%", "prices rose twelve percent last year", "twelve percent"),
        ("12 percent", "prices rose twelve per cent", "twelve per cent"),
        ("in 1961", "It began in nineteen sixty-one.", "in nineteen sixty-one"),
        ("in nineteen sixty one", "It began in 1961.", "in 1961"),
        ("two hundred people", "about 200 people came", "200 people"),
    ],
)
def test_digits_and_words_match_both_ways(prompt: str, text: str, matched: str) -> None:
    [hit] = match_one(prompt, text)
    assert hit.score == 1.0
    assert hit.text == matched


@pytest.mark.parametrize(
    ("prompt", "text", "matched"),
    [
        ("ask not", "and so ask knot what your country", "ask knot"),
        ("fellow Amercans", JFK, "fellow Americans"),
        ("Kennedy inauguration", "the Kenedy inaugration speech", "Kenedy inaugration"),
        ("ice cream", "we had icecream today", "icecream"),
        ("icecream", "we had ice cream today", "ice cream"),
    ],
)
def test_fuzzy_match_tolerates_recognition_errors(prompt: str, text: str, matched: str) -> None:
    [hit] = match_one(prompt, text)
    assert 0.8 <= hit.score < 1.0
    assert hit.text == matched


def test_fuzzy_can_be_turned_off_or_tightened() -> None:
    assert match_one("ask not", "ask knot what", fuzzy=False) == []
    assert match_one("ask not", "ask knot what", threshold=0.95) == []
    assert match_one("ask not", "ask not what", fuzzy=False)[0].score == 1.0


def test_numbers_never_match_fuzzily() -> None:
    assert match_one("born in 1961", "he was born in 1962") == []
    assert match_one("twelve percent", "it fell 13 percent") == []


@pytest.mark.parametrize("prompt", ["moon landing", "ask yes", "Berlin"])
def test_absent_phrase_does_not_match(prompt: str) -> None:
    assert match_one(prompt, JFK) == []


def test_empty_segment_matches_nothing() -> None:
    assert match_one("ask not", "") == []
    assert match_one("ask not", " ... ") == []


def test_multiple_occurrences_give_multiple_matches_in_order() -> None:
    hits = match_one("your country", JFK)
    assert [h.text for h in hits] == ["your country", "your country"]
    assert hits[0].end_ms <= hits[1].start_ms
    assert hits[0].highlight != hits[1].highlight


def test_one_span_is_reported_once() -> None:
    # "ask not" matches exactly, and also fuzzily as "so ask not" / "ask not what": one hit.
    hits = match_one("ask not", "so ask not what")
    assert len(hits) == 1
    assert hits[0].score == 1.0
    # A misheard occurrence next to an exact one is a second occurrence, not a repeat.
    hits = match_one("ask not", "ask not, ask knot")
    assert [(h.text, h.score == 1.0) for h in hits] == [("ask not", True), ("ask knot", False)]


def test_span_timing_is_proportional_to_character_position() -> None:
    text = "aaaa bbbb cccc dddd"  # 19 characters over 1000..5000 ms
    [first] = match_one("aaaa", text)
    [last] = match_one("dddd", text)
    [middle] = match_one("bbbb cccc", text)
    assert (first.start_ms, first.end_ms) == (1_000, 1_000 + round(4_000 * 4 / 19))
    assert (last.start_ms, last.end_ms) == (1_000 + round(4_000 * 15 / 19), 5_000)
    assert first.end_ms < middle.start_ms < middle.end_ms < last.start_ms


def test_surrounding_whitespace_does_not_shift_timing() -> None:
    [hit] = match_one("dddd", "   aaaa dddd   ")
    assert hit.end_ms == 5_000
    assert hit.start_ms == 1_000 + round(4_000 * 5 / 9)


def test_span_stays_within_the_segment() -> None:
    matcher = PromptMatcher([Prompt("a", "and so"), Prompt("b", "your country")])
    for hit in matcher.match("s", JFK, 10_000, 21_000):
        assert 10_000 <= hit.start_ms <= hit.end_ms <= 21_000


def test_highlight_wraps_exactly_the_match() -> None:
    [hit] = match_one("ask not", JFK)
    assert hit.highlight == JFK.replace("ask not", "<em>ask not</em>", 1)


def test_highlight_escapes_html() -> None:
    text = "<b>Tom & Jerry</b> ask not"
    [hit] = match_one("ask not", text)
    assert hit.highlight == "&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; <em>ask not</em>"


def test_matches_come_by_prompt_then_position() -> None:
    matcher = PromptMatcher([Prompt("late", "your country"), Prompt("early", "fellow americans")])
    hits = matcher.match("s", JFK, 0, 11_000)
    assert [h.prompt_id for h in hits] == ["late", "late", "early"]
    assert matcher.prompts[0].id == "late"


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_prompt_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        Prompt(id="p", text=text)


def test_prompt_without_words_is_rejected() -> None:
    with pytest.raises(ValueError, match="no words"):
        PromptMatcher([Prompt(id="p", text="?! ...")])


def test_duplicate_prompt_ids_and_bad_thresholds_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        PromptMatcher([Prompt("p", "one"), Prompt("p", "two")])
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="threshold"):
            Prompt("p", "x", threshold=bad)


# --- properties ---------------------------------------------------------------------------------

_WORD = st.sampled_from(
    ["ask", "not", "what", "Your", "country", "can", "do", "for", "you", "so", "my", "fellow"]
)
_SEP = st.sampled_from([" ", ", ", ". ", " - ", "! ", "  "])


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(_WORD, _SEP), min_size=1, max_size=25), st.data())
def test_any_run_of_words_is_found_exactly(
    pieces: list[tuple[str, str]], data: st.DataObject
) -> None:
    text = "".join(w + s for w, s in pieces)
    i = data.draw(st.integers(0, len(pieces) - 1))
    j = data.draw(st.integers(i + 1, min(len(pieces), i + 4)))
    prompt = " ".join(w for w, _ in pieces[i:j])
    hits = match_one(prompt, text)
    assert any(h.score == 1.0 for h in hits)
    for hit in hits:
        assert 1_000 <= hit.start_ms <= hit.end_ms <= 5_000
        assert re.sub("</?em>", "", hit.highlight) == html.escape(text, quote=False)
        assert hit.highlight.count("<em>") == 1
        inner = hit.highlight.split("<em>")[1].split("</em>")[0]
        assert inner == html.escape(hit.text, quote=False)
    spans = sorted((h.start_ms, h.end_ms) for h in hits)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
