"""How evaluation/speaker_attribution.py scores the speakers of a diarized
transcript: words by their times against the reference turns, labels mapped one
to one, an extra label or a missing one counting as wrong."""

from __future__ import annotations

import pytest

from evaluation.speaker_attribution import RefTurn, attribution
from voxwire_client.messages import SegmentData, WordData

REFERENCE = [RefTurn(0, 4000, "agent"), RefTurn(4500, 8000, "customer")]


def final(n: int, start: int, end: int, text: str, speaker: str | None) -> SegmentData:
    return SegmentData(id=f"s{n}", index=n, start_ms=start, end_ms=end, text=text, speaker=speaker)


def test_the_labels_are_mapped_and_every_word_counts() -> None:
    finals = [
        final(0, 0, 4000, "one two three four", "S2"),
        final(1, 4400, 8000, "five six seven eight", "S1"),  # starts in the gap
    ]
    scored = attribution(finals, REFERENCE)
    assert (scored.words, scored.wrong_words, scored.speakers) == (8, 0, 2)
    assert scored.error == 0 and scored.final_error == 0


def test_one_speaker_for_everyone_gets_the_other_half_wrong() -> None:
    finals = [final(0, 0, 4000, "a b c", "S1"), final(1, 4500, 8000, "d", "S1")]
    scored = attribution(finals, REFERENCE)
    assert (scored.wrong_words, scored.speakers, scored.wrong_finals) == (1, 1, 1)
    assert scored.error == pytest.approx(0.25)


def test_a_turn_split_off_under_a_third_label_is_wrong() -> None:
    finals = [
        final(0, 0, 2000, "a b", "S1"),
        final(1, 2000, 4000, "c d", "S3"),
        final(2, 4500, 8000, "e f g h", "S2"),
        final(3, 8000, 9000, "i", None),
    ]
    scored = attribution(finals, REFERENCE)
    assert (scored.words, scored.wrong_words, scored.speakers) == (9, 3, 3)
    assert scored.wrong_finals == 2


def test_word_times_decide_over_the_segment_span() -> None:
    words = (
        WordData(word="a", start_ms=3000, end_ms=3500, probability=1),
        WordData(word="b", start_ms=5000, end_ms=5500, probability=1),
        WordData(word="c", start_ms=6000, end_ms=6500, probability=1),
    )
    split = final(0, 3000, 6500, "a b c", "S1").model_copy(update={"words": words})
    other = final(1, 0, 2000, "x y", "S2")
    scored = attribution([other, split], REFERENCE)
    # S1 takes the customer (two words), S2 the agent: only "a" is wrong
    assert (scored.words, scored.wrong_words) == (5, 1)
