"""The pure parts of separate channels: splitting interleaved frames, speech
spans and turns, the echo rule and the time order of the tracks' finals."""

from __future__ import annotations

import numpy as np
import pytest

from voxwire.audio.samples import SAMPLE_RATE
from voxwire.workers.channels import (
    ECHO_DB,
    TrackFinal,
    deinterleave,
    drop_echoes,
    in_time_order,
    is_echo,
    level_db,
    shared_words,
    speech_only,
    speech_spans,
    turns,
)


def test_interleaved_pcm16_frames_split_into_one_chunk_per_channel() -> None:
    left = np.array([1, 2, 3], dtype="<i2")
    right = np.array([-1, -2, -3], dtype="<i2")
    data = np.stack([left, right], axis=1).tobytes()
    assert deinterleave(data, 2, 2) == [left.tobytes(), right.tobytes()]
    assert deinterleave(b"abcd", 2, 1) == [b"ac", b"bd"]  # G.711: a byte a sample
    with pytest.raises(ValueError, match="whole frames"):
        deinterleave(b"abc", 2, 2)


def test_speech_spans_are_padded_and_short_gaps_bridged() -> None:
    probabilities = [0.0] * 10 + [0.9] * 5 + [0.0] * 10 + [0.9] * 2 + [0.0] * 100
    spans = speech_spans(probabilities, 32)
    assert spans == [(320 - 300, 27 * 32 + 300)]  # the 320 ms gap is bridged
    far = [0.9] * 2 + [0.0] * 100 + [0.9] * 2
    assert len(speech_spans(far, 32)) == 2
    track = np.ones(4 * SAMPLE_RATE, dtype=np.float32)
    kept = speech_only(track, far, 32)
    assert kept[: 16 * 64].all() and not kept[16 * 1500 : 16 * 2500].any()


def test_turns_split_at_long_silences_and_at_the_engines_window() -> None:
    assert turns([(0, 1000), (1500, 3000), (6000, 7000)]) == [(0, 3000), (6000, 7000)]
    long = [(n * 5000, n * 5000 + 4000) for n in range(8)]
    stretches = turns(long)
    assert all(end - start <= 25_000 for start, end in stretches)
    assert stretches[0][0] == 0 and stretches[-1][1] == long[-1][1]


def _tone(seconds: float, gain: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (gain * np.sin(2 * np.pi * 300 * t)).astype(np.float32)


def test_a_quiet_overlapping_copy_of_the_other_channels_words_is_an_echo() -> None:
    loud, quiet = _tone(4, 0.5), _tone(4, 0.5 * 10 ** (-(ECHO_DB + 2) / 20))
    said = TrackFinal(1, 0, 3000, "ask not what your country can do for you")
    echo = TrackFinal(2, 100, 3100, "Ask not what your country can do for you.")
    assert level_db(loud, 0, 3000) - level_db(quiet, 0, 3000) > ECHO_DB
    assert is_echo(echo, said, [loud, quiet])
    assert not is_echo(said, echo, [loud, quiet])
    assert drop_echoes([said, echo], [loud, quiet]) == [said]


def test_real_overlap_is_kept_an_echo_needs_the_words_the_level_and_the_time() -> None:
    loud, also_loud = _tone(10, 0.5), _tone(10, 0.4)
    said = TrackFinal(1, 0, 3000, "ask not what your country can do for you")
    both = TrackFinal(2, 0, 3000, "ask not what your country can do for you")
    assert drop_echoes([said, both], [loud, also_loud]) == [said, both]  # same level
    quiet = _tone(10, 0.01)
    other_words = TrackFinal(2, 0, 3000, "yes I would like to cancel my order")
    assert drop_echoes([said, other_words], [loud, quiet]) == [said, other_words]
    read_back = TrackFinal(2, 5000, 8000, "ask not what your country can do for you")
    assert drop_echoes([said, read_back], [loud, quiet]) == [said, read_back]
    assert shared_words("", "anything") == 0.0


def test_the_tracks_finals_go_out_by_start_time_then_channel() -> None:
    finals = [
        TrackFinal(2, 1000, 2000, "b"),
        TrackFinal(1, 0, 3000, "a"),
        TrackFinal(1, 1000, 1500, "c"),
        TrackFinal(2, 1000, 1500, "d"),
    ]
    assert [f.text for f in in_time_order(finals)] == ["a", "c", "d", "b"]
