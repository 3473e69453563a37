"""The times of a transcript's redacted words, read from its finals as delivered."""

from __future__ import annotations

from voxwire.text.redacted_times import is_redacted, redacted_spans
from voxwire_client.messages import SegmentData, WordData


def _final(
    index: int, start: int, end: int, text: str, *words: tuple[str, int, int]
) -> SegmentData:
    return SegmentData(
        id=f"s-{index}",
        index=index,
        start_ms=start,
        end_ms=end,
        text=text,
        words=tuple(WordData(word=w, start_ms=a, end_ms=b, probability=0.9) for w, a, b in words),
    )


def test_the_redacted_words_of_entity_and_mask_modes_are_found() -> None:
    finals = [
        _final(0, 0, 2_000, "Nothing here, 12 apples.", (" Nothing", 0, 400), (" 12", 900, 1_100)),
        _final(
            1,
            2_000,
            5_000,
            "My card is [CREDIT_CARD], thanks.",
            (" My", 2_000, 2_200),
            (" card", 2_200, 2_500),
            (" [CREDIT_CARD],", 2_900, 4_400),
            (" thanks.", 4_500, 4_900),
        ),
        _final(
            2, 5_000, 7_000, "Call ***-****.", (" Call", 5_000, 5_300), (" ***-****.", 5_400, 6_600)
        ),
    ]
    assert redacted_spans(finals) == ((2_900, 4_400), (5_400, 6_600))
    assert is_redacted("[NUMBER].") and is_redacted("***") and not is_redacted("4*5")


def test_a_redaction_no_word_can_be_placed_on_takes_the_whole_final() -> None:
    no_words = _final(0, 1_000, 3_000, "It is [US_SSN].")
    words_lost = _final(1, 3_000, 4_000, "Mail [EMAIL_ADDRESS]", (" Mail", 3_000, 3_300))
    assert redacted_spans([no_words, words_lost]) == ((1_000, 3_000), (3_000, 4_000))
