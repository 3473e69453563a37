"""Windows of committed text (voxwire.wire.windows) and the hits across segments they
give (voxwire.search.spans)."""

from __future__ import annotations

from voxwire.search.query import parse_query
from voxwire.search.spans import spans_across
from voxwire.wire.windows import HOP_MS, LENGTH_MS, TextWindow, windows_after, windows_of
from voxwire_client.messages import SegmentData


def _seg(index: int, start_ms: int, end_ms: int, text: str = "") -> SegmentData:
    return SegmentData(
        id=f"s-{index}", index=index, start_ms=start_ms, end_ms=end_ms, text=text or f"w{index}"
    )


def _ids(window: TextWindow) -> list[int]:
    return [s.index for s in window.segments]


def test_a_window_holds_every_final_that_overlaps_it_whole() -> None:
    finals = [_seg(0, 0, 10_000), _seg(1, 12_000, 29_000), _seg(2, 29_500, 40_000)]
    windows = {w.index: w for w in windows_of(finals, "s")}
    assert (windows[0].start_ms, windows[0].end_ms) == (0, LENGTH_MS)
    assert _ids(windows[0]) == [0, 1, 2]  # 2 starts at 29.5 s, before the window ends
    assert _ids(windows[1]) == [1, 2]  # 15-45 s
    assert 2 not in windows  # 30-60 s holds only the last final: not sent


def test_consecutive_finals_share_a_window_unless_a_long_silence_parts_them() -> None:
    for gap_ms in (0, 1_000, LENGTH_MS - HOP_MS - 1):
        for start in range(0, 60_000, 3_700):
            finals = [_seg(0, start, start + 2_000), _seg(1, start + 2_000 + gap_ms, 90_000)]
            assert any(_ids(w) == [0, 1] for w in windows_of(finals, "s")), (gap_ms, start)
    finals = [_seg(0, 0, 1_000), _seg(1, 1_000 + LENGTH_MS, LENGTH_MS + 5_000)]
    assert windows_of(finals, "s") == []


def test_each_final_resends_the_windows_it_changed_and_the_last_versions_are_the_whole() -> None:
    finals = [_seg(i, i * 4_100, i * 4_100 + 3_900) for i in range(40)]
    latest: dict[int, TextWindow] = {}
    for n in range(1, len(finals) + 1):
        for window in windows_after(finals[:n], "s"):
            assert finals[n - 1] in window.segments
            latest[window.index] = window
    assert list(latest.values()) == windows_of(finals, "s")


def test_windows_survive_the_bus() -> None:
    (window,) = windows_of([_seg(0, 0, 1_000, "ask not"), _seg(1, 1_000, 2_000, "what")], "s")
    assert TextWindow.model_validate_json(window.encode()) == window
    assert window.text == "ask not what"


def _texts(*texts: str) -> list[SegmentData]:
    return [_seg(i, i * 1000, i * 1000 + 900, t) for i, t in enumerate(texts)]


def test_the_shortest_runs_of_segments_that_answer_together() -> None:
    segments = _texts("so my fellow", "americans ask not", "what your country", "can do")
    assert spans_across(segments, parse_query('"fellow americans"')) == [(0, 1)]
    assert spans_across(segments, parse_query('"not what your country can"')) == [(1, 3)]
    assert spans_across(segments, parse_query("fellow country")) == [(0, 2)]
    # wholly inside one segment: left to the segment search
    assert spans_across(segments, parse_query('"ask not"')) == []
    assert spans_across(segments, parse_query("americans what")) == [(1, 2)]
    # a run that holds a shorter answer is not reported
    repeated = _texts("ask", "not", "ask not")
    assert spans_across(repeated, parse_query('"ask not"')) == [(0, 1)]


def test_numbers_and_misrecognised_words_across_a_boundary() -> None:
    segments = _texts("it was twenty", "five percent")
    assert spans_across(segments, parse_query("25%")) == [(0, 1)]
    assert spans_across(segments, parse_query("20")) == []  # "twenty five" is 25
    segments = _texts("fellow", "amercans")
    assert spans_across(segments, parse_query("fellow americans")) == []
    assert spans_across(segments, parse_query("fellow americans"), fuzzy=True) == [(0, 1)]
