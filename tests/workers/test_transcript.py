"""The transcript builder shared by files and streams: seq, ids, redaction,
matching and the hallucination filter, as plain values."""

from __future__ import annotations

import re

import pytest

from voxwire.core.errors import ConfigError, EngineError
from voxwire.wire.records import FIRST_WORKER_SEQ
from voxwire.workers.engine import Segment
from voxwire.workers.transcript import TranscriptBuilder
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    ProgressMessage,
    SegmentMessage,
    SessionStatus,
)


def test_finals_are_numbered_and_matched_with_seq_from_the_first_worker_seq() -> None:
    builder = TranscriptBuilder("s1", language="en", prompts=(PromptSpec(id="p", text="budget"),))
    first = builder.final(0, 900, "the budget")
    second = builder.final(1000, 1900, "something else")
    final, match = first
    assert isinstance(final, SegmentMessage) and isinstance(match, MatchMessage)
    assert (final.seq, match.seq) == (FIRST_WORKER_SEQ, FIRST_WORKER_SEQ + 1)
    assert final.segment.id == "s1-0" and match.segment_ids == ("s1-0",)
    (other,) = second
    assert isinstance(other, SegmentMessage) and other.segment.index == 1
    transcript = builder.transcript(2000)
    assert transcript.text == "the budget something else" and transcript.seq == 5


def test_a_partial_carries_its_final_id_and_is_not_repeated() -> None:
    builder = TranscriptBuilder("s1", language=None, redact=RedactMode.MASK)
    (partial,) = builder.partial(0, 500, "card 4111 1111")
    assert isinstance(partial, SegmentMessage) and partial.type == "partial"
    assert partial.segment.id == "s1-0" and "4111" not in partial.segment.text
    assert builder.partial(0, 700, "card 4111 1111") == []  # the same text again
    assert builder.partial(0, 700, "") == []
    builder.end_segment()
    assert builder.partial(0, 900, "card 4111 1111")  # a new segment may say the same


def _texts(messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.segment.text for m in messages if isinstance(m, SegmentMessage)]


@pytest.mark.parametrize("mode", [RedactMode.ENTITY, RedactMode.NUMBERS])
def test_a_card_number_split_over_two_finals_is_redacted_in_both_and_in_partials(
    mode: RedactMode,
) -> None:
    builder = TranscriptBuilder("s1", language="en", redact=mode)
    shown = _texts(builder.partial(0, 800, "my card number is 4111"))
    shown += _texts(builder.final(0, 1000, "my card number is 4111 1111"))
    shown += _texts(builder.partial(1200, 1600, "1111"))
    shown += _texts(builder.partial(1200, 1900, "1111 one one"))
    shown += _texts(builder.final(1200, 2000, "1111 1111, thanks."))
    assert shown[1] == "my card number is [CREDIT_CARD]"
    assert shown[-1] == "[CREDIT_CARD], thanks."
    assert not any(re.search(r"\d|one", text) for text in shown), shown
    # the final after that is a new sentence: its numbers are its own again
    (later,) = _texts(builder.final(2500, 3500, "In 1961 he was twelve."))
    assert later == (
        "In [NUMBER] he was twelve." if mode is RedactMode.NUMBERS else "In 1961 he was twelve."
    )


def test_a_resumed_stream_knows_how_its_last_final_ended() -> None:
    before = TranscriptBuilder("s1", language="en", redact=RedactMode.MASK)
    (first,) = _texts(before.final(0, 1000, "right, my card number is"))
    resumed = TranscriptBuilder("s1", language="en", redact=RedactMode.MASK, finals=before.finals)
    (second,) = _texts(resumed.final(1000, 2000, "4111 1111 1111 1112."))
    assert (first, second) == ("right, my card number is", "**** **** **** ****.")


def test_the_hallucination_filter_needs_a_vad_score() -> None:
    builder = TranscriptBuilder("s1", language="en")
    segments = [Segment(0, 500, " Thank you. ")]
    assert builder.heard(segments, vad_mean=0.1) == ""
    assert builder.heard(segments, vad_mean=0.9) == "Thank you."
    assert builder.heard(segments) == "Thank you."  # a file: nothing filtered


def test_progress_and_errors() -> None:
    builder = TranscriptBuilder("s1", language="en", first_seq=7)
    stream = builder.stream_progress(SessionStatus.TRANSCRIBING, 1200, speech=True, lag_ms=30)
    job = builder.file_progress(SessionStatus.TRANSCRIBING, 2500, 10_000)
    error = builder.error(EngineError("boom", hint="retry"), fatal=False)
    assert isinstance(stream, ProgressMessage) and (stream.seq, stream.percent) == (7, 0.0)
    assert (stream.processed_ms, stream.duration_ms, stream.speech) == (1200, 1200, True)
    assert (job.seq, job.percent, job.speech) == (8, 25.0, None)
    assert isinstance(error, ErrorMessage) and (error.seq, error.fatal) == (9, False)


def test_unusable_prompts() -> None:
    prompts = (PromptSpec(id="p", text="a b"), PromptSpec(id="p", text="c d"))
    with pytest.raises(ConfigError, match="duplicate prompt id"):
        TranscriptBuilder("s1", language="en", prompts=prompts)
