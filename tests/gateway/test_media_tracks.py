"""A call's inbound and outbound tracks lined up as interleaved stereo frames."""

from __future__ import annotations

import pytest

from voxwire.gateway.media_tracks import MULAW_SILENCE, TrackInterleaver

BOTH = ("inbound", "outbound")
SILENCE = bytes([MULAW_SILENCE])


def frames(data: bytes) -> list[tuple[int, int]]:
    return [(data[n], data[n + 1]) for n in range(0, len(data), 2)]


def test_the_tracks_go_out_interleaved_once_both_have_the_audio() -> None:
    both = TrackInterleaver(BOTH)
    assert both.add("inbound", b"\x01" * 160, 0) == b""  # waits for the outbound track
    out = both.add("outbound", b"\x02" * 160, 0)
    assert frames(out) == [(1, 2)] * 160
    assert both.add("outbound", b"\x04" * 160, 20) == b""
    assert frames(both.add("inbound", b"\x03" * 160, 20)) == [(3, 4)] * 160


def test_a_lost_message_is_filled_with_silence_so_the_tracks_stay_aligned() -> None:
    both = TrackInterleaver(BOTH)
    out = both.add("outbound", b"\x02" * 480, 0)  # 60 ms
    out += both.add("inbound", b"\x01" * 160, 0)
    out += both.add("inbound", b"\x03" * 160, 40)  # the 20 ms message at 20 ms was lost
    assert frames(out) == [(1, 2)] * 160 + [(MULAW_SILENCE, 2)] * 160 + [(3, 2)] * 160


def test_a_silent_track_does_not_hold_the_other_back_longer_than_the_skew() -> None:
    both = TrackInterleaver(BOTH, max_skew_ms=100)
    out = b"".join(both.add("inbound", b"\x01" * 160, 20 * n) for n in range(10))  # 200 ms
    assert len(out) == 2 * 8 * 100  # all but the last 100 ms, the outbound track silent
    assert set(frames(out)) == {(1, MULAW_SILENCE)}
    rest = both.flush()
    assert len(rest) == 2 * 8 * 100 and both.flush() == b""


def test_a_repeated_payload_is_not_heard_twice() -> None:
    both = TrackInterleaver(BOTH)
    both.add("inbound", b"\x01" * 160, 0)
    both.add("inbound", b"\x01" * 160, 0)  # sent again
    out = both.add("outbound", b"\x02" * 320, 0) + both.flush()
    assert frames(out) == [(1, 2)] * 160 + [(MULAW_SILENCE, 2)] * 160


def test_an_unknown_track_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of"):
        TrackInterleaver(BOTH).add("sideways", SILENCE)
