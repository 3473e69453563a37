"""The stream intake on its own: chunks in, work items out, no engine and no queue."""

from __future__ import annotations

import numpy as np
import pytest

from tests.workers.stream.test_session import CHUNK_MS, ScriptedVad, chunks, tone
from voxwire.core.errors import AudioError
from voxwire.workers.stream.endpointing import EndpointConfig
from voxwire.workers.stream.intake import (
    MAX_AHEAD,
    ChunkOrderError,
    FinalWork,
    LikelyFinalWork,
    PartialWork,
    ProgressWork,
    StreamClosedError,
    StreamIntake,
)


def intake(spans: list[tuple[int, int, float]], **resume: int) -> StreamIntake:
    return StreamIntake("s1", EndpointConfig(), ScriptedVad(spans), **resume)


def test_speech_becomes_progress_partials_a_likely_final_and_a_final() -> None:
    stream = intake([(1000, 3000, 0.95)])
    work = []
    for index, chunk in enumerate(chunks(tone(5.0))):
        work += stream.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    assert stream.end(5.0) == []  # the final came with the pause
    kinds = [type(w) for w in work]
    assert kinds == [ProgressWork, PartialWork, LikelyFinalWork, FinalWork, ProgressWork]
    assert [w.speech for w in work if isinstance(w, ProgressWork)] == [True, False]
    final = work[3]
    assert isinstance(final, FinalWork) and (final.start_ms, final.end_ms) == (824, 3208)
    assert len(final.audio) == (3208 - 824) * 16 and final.vad_mean > 0.5
    assert final.reason == "silence" and final.settled == (32, 128)  # 3208 ms = chunk 32 + 8 ms
    assert final.audio_end_at == 3.3 and final.decided_at == 3.7
    assert stream.stream_ms == 5000


def test_chunk_rules() -> None:
    stream = intake([])
    parts = chunks(np.zeros(16_000, dtype=np.float32))
    assert stream.push(0, parts[0], 0.1) == []
    assert stream.push(0, parts[0], 0.2) == []  # a redelivery
    with pytest.raises(ChunkOrderError):
        stream.push(-1, parts[2], 0.3)
    with pytest.raises(AudioError, match="2-byte"):
        stream.push(1, b"\x00" * 3, 0.4)  # consumed: its audio is dropped
    stream.push(2, parts[2], 0.5)
    assert stream.next_chunk == 3 and stream.stream_ms == 2 * CHUNK_MS
    stream.fail()
    with pytest.raises(StreamClosedError, match="failed"):
        stream.push(3, parts[3], 0.6)


def test_chunks_that_passed_each_other_are_taken_in_turn_and_the_end_waits_for_them() -> None:
    """Two bridges: chunks 1 and 3 and the end come before 0 and 2."""
    ordered, passed = intake([(1000, 3000, 0.95)]), intake([(1000, 3000, 0.95)])
    parts = chunks(tone(5.0))
    expected = [w for i, part in enumerate(parts) for w in ordered.push(i, part, 1.0)]
    expected += ordered.end(1.0)
    got = []
    for index in [1, 3, *range(5, len(parts), 2)]:
        got += passed.push(index, parts[index], 1.0)
    assert passed.end(1.0) == [] and not passed.ended
    assert passed.end_waiting_since == 1.0 and passed.missing == (0, 0)
    assert passed.push(1, parts[1], 1.0) == []  # a redelivery of one that waits
    for index in [0, 2, *range(4, len(parts), 2)]:
        got += passed.push(index, parts[index], 1.0)
    assert passed.ended and passed.end_waiting_since is None and passed.missing is None
    assert [(type(w), getattr(w, "bounds", None)) for w in got] == [
        (type(w), getattr(w, "bounds", None)) for w in expected
    ]
    assert passed.stream_ms == ordered.stream_ms == 5000


def test_an_end_that_gives_up_takes_the_chunks_after_the_gap() -> None:
    stream = intake([])
    parts = chunks(np.zeros(16_000, dtype=np.float32))
    stream.push(0, parts[0], 0.1)
    stream.push(4, parts[4], 0.2)
    stream.push(5, parts[5], 0.3)
    assert stream.end(0.4) == [] and stream.missing == (1, 3)
    stream.end(30.4, give_up=True)
    assert stream.ended and stream.stream_ms == 3 * CHUNK_MS and stream.missing is None
    assert stream.next_chunk == 6
    assert stream.push(1, parts[1], 30.5) == []  # behind what was taken: as a redelivery
    with pytest.raises(StreamClosedError, match="ended"):
        stream.push(6, parts[6], 30.6)


def test_a_chunk_too_far_ahead_raises_and_is_not_consumed() -> None:
    stream = intake([])
    part = chunks(np.zeros(1600, dtype=np.float32))[0]
    for index in range(1, MAX_AHEAD + 1):
        stream.push(index, part, 0.1)
    with pytest.raises(ChunkOrderError, match="expects chunk 0"):
        stream.push(MAX_AHEAD + 1, part, 0.2)
    stream.push(0, part, 0.3)
    assert stream.next_chunk == MAX_AHEAD + 1
    stream.push(MAX_AHEAD + 1, part, 0.4)
    assert stream.stream_ms == (MAX_AHEAD + 2) * CHUNK_MS


def test_a_refused_chunk_that_waited_is_reported_after_the_others_are_taken() -> None:
    stream = intake([])
    parts = chunks(np.zeros(16_000, dtype=np.float32))
    stream.push(1, b"\x00" * 3, 0.1)
    stream.push(2, parts[2], 0.2)
    stream.push(0, parts[0], 0.3)
    assert stream.next_chunk == 3 and stream.stream_ms == 2 * CHUNK_MS
    error = stream.take_decode_error()
    assert isinstance(error, AudioError) and "2-byte" in str(error) and error.sid == "s1"
    assert stream.take_decode_error() is None


def test_a_resumed_intake_skips_what_is_settled() -> None:
    stream = intake([(0, 10_000, 0.95)], origin_sample=16 * 250, next_chunk=2, skip_samples=800)
    parts = chunks(tone(1.0))
    assert stream.push(1, parts[1], 0.1) == []  # before the resume point: a redelivery
    stream.push(2, parts[2], 0.2)
    assert stream.stream_ms == 250 + CHUNK_MS - 50  # 800 samples of chunk 2 were settled
    for index in range(3, 10):
        stream.push(index, parts[index], index / 10)
    (final,) = [w for w in stream.end(1.0) if isinstance(w, FinalWork)]
    assert (final.end_ms, final.reason, final.settled) == (1000, "end_of_stream", (10, 0))
    assert final.start_ms >= 250  # nothing before the resume point


def test_a_flush_closes_the_open_segment_now_and_the_stream_goes_on() -> None:
    stream = intake([(1000, 5000, 0.95)])
    parts = chunks(tone(5.0))
    work = []
    for index, chunk in enumerate(parts[:30]):  # 3 s: speech from 1 s, no pause yet
        work += stream.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    assert not [w for w in work if isinstance(w, FinalWork)]
    (flushed, stopped) = stream.flush(3.05)
    # the segment ends at the last whole VAD frame (93 x 32 ms), settled inside chunk 29
    assert isinstance(flushed, FinalWork) and flushed.reason == "flush"
    assert (flushed.start_ms, flushed.end_ms) == (824, 2976) and flushed.decided_at == 3.05
    assert flushed.settled == (29, 1216) and not flushed.continues
    assert isinstance(stopped, ProgressWork) and not stopped.speech
    assert stream.flush(3.06) == []  # nothing open: nothing to flush
    for index, chunk in enumerate(parts[30:], start=30):  # the speaker goes on
        work = stream.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    finals = [w for w in stream.end(5.0) if isinstance(w, FinalWork)]
    assert [(f.start_ms, f.end_ms, f.reason) for f in finals] == [(2976, 5000, "end_of_stream")]
    assert stream.flush(5.1) == []  # after the end


def test_a_flush_waits_for_chunks_that_were_passed() -> None:
    stream = intake([(0, 5000, 0.95)])
    parts = chunks(tone(2.0))
    for index in range(10):
        stream.push(index, parts[index], 0.1 * index)
    stream.push(11, parts[11], 1.2)  # chunk 10 is late
    assert stream.flush(1.25) == []
    work = stream.push(10, parts[10], 1.3)
    finals = [w for w in work if isinstance(w, FinalWork)]
    assert [(f.end_ms, f.reason) for f in finals] == [(1184, "flush")]  # chunks 10 and 11 in
