"""FrameSplitter and SegmentBuffer: chunks to frames, stream time to samples."""

from __future__ import annotations

import numpy as np
import pytest

from voxwire.workers.stream.audio import FrameSplitter, SegmentBuffer

pytestmark = pytest.mark.timeout(60)


def ramp(start: int, count: int) -> np.ndarray:
    """Samples whose value is their stream index (exact in float32 below 2**24)."""
    return np.arange(start, start + count, dtype=np.float32)


def test_frame_splitter_cuts_chunks_of_any_size_into_frames() -> None:
    splitter = FrameSplitter()
    rng = np.random.default_rng(1)
    position, frames = 0, []
    for size in rng.integers(0, 3000, size=60):
        frames += splitter.push(ramp(position, int(size)))
        position += int(size)
    assert [start for start, _ in frames] == [i * 32 for i in range(len(frames))]
    joined = np.concatenate([frame for _, frame in frames])
    np.testing.assert_array_equal(joined, ramp(0, len(joined)))
    assert len(joined) + splitter.pending_samples == position
    assert splitter.pending_samples < 512


def test_frame_splitter_refuses_odd_frames_and_stereo() -> None:
    with pytest.raises(ValueError):
        FrameSplitter(500)
    with pytest.raises(ValueError, match="mono"):
        FrameSplitter().push(np.zeros((2, 512), dtype=np.float32))


def test_segment_buffer_slices_by_stream_time() -> None:
    buffer = SegmentBuffer()
    buffer.append(ramp(0, 16_000))
    buffer.append(ramp(16_000, 8_000))
    assert (buffer.start_ms, buffer.end_ms) == (0, 1500)
    np.testing.assert_array_equal(buffer.slice(250, 1250), ramp(4_000, 16_000))
    assert len(buffer.slice(700, 700)) == 0


def test_segment_buffer_slices_are_copies() -> None:
    buffer = SegmentBuffer()
    buffer.append(ramp(0, 1600))
    part = buffer.slice(0, 100)
    part[:] = -1.0
    np.testing.assert_array_equal(buffer.slice(0, 100), ramp(0, 1600))


def test_segment_buffer_discards_old_audio() -> None:
    buffer = SegmentBuffer()
    buffer.append(ramp(0, 32_000))
    buffer.discard_before(1200)
    assert buffer.start_ms == 1200 and buffer.held_samples == 32_000 - 19_200
    np.testing.assert_array_equal(buffer.slice(1200, 1300), ramp(19_200, 1600))
    with pytest.raises(ValueError, match="not held"):
        buffer.slice(1100, 1300)
    with pytest.raises(ValueError, match="not held"):
        buffer.slice(1900, 2100)
    buffer.discard_before(500)  # already gone: no-op
    assert buffer.start_ms == 1200
    buffer.discard_before(10_000)  # never past the audio appended
    assert buffer.start_ms == buffer.end_ms == 2000


def test_segment_buffer_stays_bounded_over_a_long_stream() -> None:
    buffer = SegmentBuffer(max_seconds=5)
    rng = np.random.default_rng(2)
    position = 0
    for size in rng.integers(1, 5000, size=2000):  # about 5 minutes, below 2**24 samples
        buffer.append(ramp(position, int(size)))
        position += int(size)
        buffer.discard_before(max(position // 16 - 3000, 0))  # keep about 3 s
        assert buffer.held_samples <= 3000 * 16 + 16
    end = buffer.end_ms * 16
    expected = ramp(end - 16_000, 16_000)
    np.testing.assert_array_equal(buffer.slice(buffer.end_ms - 1000, buffer.end_ms), expected)


def test_segment_buffer_cap_drops_the_oldest_audio() -> None:
    buffer = SegmentBuffer(max_seconds=1)
    buffer.append(ramp(0, 12_000))
    buffer.append(ramp(12_000, 12_000))
    assert buffer.held_samples == 16_000
    assert (buffer.start_ms, buffer.end_ms) == (500, 1500)
    buffer.append(ramp(24_000, 40_000))  # one chunk larger than the cap
    assert (buffer.start_ms, buffer.end_ms) == (3000, 4000)
    np.testing.assert_array_equal(buffer.slice(3000, 4000), ramp(48_000, 16_000))
