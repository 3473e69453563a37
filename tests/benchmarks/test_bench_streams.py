"""What the stream benchmarks measure of partials, on messages as a subscriber
gets them: the words of a partial that its final changed or dropped, and when
the first partial of a turn arrived."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from voxwire_client.messages import SegmentData, SegmentMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_streams import Sentence, StreamRun


def _segment(kind: str, index: int, text: str, start_ms: int, seq: int) -> SegmentMessage:
    data = SegmentData(
        id=f"s_x-{index}", index=index, start_ms=start_ms, end_ms=start_ms + 900, text=text
    )
    return SegmentMessage(sid="s_x", seq=seq, type=kind, segment=data)  # type: ignore[arg-type]


def test_partial_words_that_their_final_changed_are_counted_and_added_words_are_not() -> None:
    run = StreamRun(started=100.0)
    run.events = [
        (101.5, _segment("partial", 0, "The trucks leaf", 1000, 1)),  # "leaf" became "leave"
        (102.5, _segment("partial", 0, "The trucks leave the", 1000, 2)),
        (103.0, _segment("final", 0, "The trucks leave the warehouse on Monday.", 1000, 3)),
        (105.2, _segment("partial", 1, "Thursday", 4000, 4)),  # dropped by its final
        (106.0, _segment("final", 1, "That works for us.", 4000, 5)),
        (107.0, _segment("partial", 2, "no final yet", 7000, 6)),  # not counted
    ]
    assert run.partial_churn() == (2, 8)
    turns = [Sentence(1.0, 2.8), Sentence(4.0, 5.5)]
    assert run.first_partials(turns) == pytest.approx([0.5, 1.2])
