"""The audio side of a live stream: VAD frames in, segment audio out.

Two small pure helpers for a stream's audio, addressed by stream time (ms
since the first sample; 16 samples per ms at 16 kHz):

- :class:`FrameSplitter` cuts chunks of any length (clients send PCM chunks
  of their own size) into the fixed frames a VAD scores, keeping the
  remainder for the next chunk.
- :class:`SegmentBuffer` keeps the stream's recent audio and hands out copies
  of ``[start_ms, end_ms)`` for :class:`~voxwire.workers.stream.endpointing.PartialDue`
  and :class:`~voxwire.workers.stream.endpointing.SegmentFinal` events. The owner
  discards audio older than :attr:`Endpointer.retain_from_ms
  <voxwire.workers.stream.endpointing.Endpointer.retain_from_ms>` after handling each
  frame's events, so memory stays bounded by the longest segment plus the
  pre-roll; ``max_seconds`` is a hard ceiling on top of that.

Typical use, per stream::

    for start_ms, frame in splitter.push(chunk):
        buffer.append(frame)
        for event in endpointer.push(start_ms, vad.speech_probability(frame)):
            if isinstance(event, (PartialDue, SegmentFinal)):
                audio = buffer.slice(event.start_ms, event.end_ms)  # a copy
                ...
        buffer.discard_before(endpointer.retain_from_ms)
"""

from __future__ import annotations

import numpy as np

from voxwire.audio.decoding import SAMPLE_RATE, Audio

_SAMPLES_PER_MS = SAMPLE_RATE // 1000


class FrameSplitter:
    """Cuts a stream of chunks into frames of ``frame_samples`` samples."""

    def __init__(self, frame_samples: int = 512, *, start_sample: int = 0) -> None:
        """``start_sample``: the stream sample index of the first sample pushed."""
        if frame_samples <= 0 or frame_samples % _SAMPLES_PER_MS:
            raise ValueError(f"a frame of {frame_samples} samples is not a whole number of ms")
        self.frame_samples = frame_samples
        self._pending = np.empty(0, dtype=np.float32)
        self._next_start = start_sample  # sample index of the next frame

    def push(self, samples: Audio) -> list[tuple[int, Audio]]:
        """Append ``samples``; return the frames now complete as
        ``(start_ms, frame)`` pairs, in order."""
        data = np.concatenate([self._pending, _mono(samples)])
        count = len(data) // self.frame_samples
        cut = count * self.frame_samples
        frames = data[:cut].reshape(count, self.frame_samples)
        self._pending = data[cut:].copy()
        out = []
        for frame in frames:
            out.append((self._next_start // _SAMPLES_PER_MS, frame))
            self._next_start += self.frame_samples
        return out

    @property
    def pending_samples(self) -> int:
        """Samples waiting for the rest of their frame."""
        return len(self._pending)


class SegmentBuffer:
    """A stream's recent audio, sliced by stream time.

    Holds the samples from :attr:`start_ms` to :attr:`end_ms`. Appending past
    ``max_seconds`` drops the oldest audio, a safety net for an owner that
    never calls :meth:`discard_before`.
    """

    def __init__(self, max_seconds: float = 120.0, *, start_sample: int = 0) -> None:
        """``start_sample``: the stream sample index of the first sample appended."""
        self._max = int(max_seconds * SAMPLE_RATE)
        if self._max <= 0:
            raise ValueError("a segment buffer must hold some audio")
        self._data = np.empty(min(self._max, 10 * SAMPLE_RATE), dtype=np.float32)
        self._head = 0  # index in _data of the oldest sample held
        self._tail = 0  # index in _data after the newest sample
        self._origin = start_sample  # stream sample index of _data[_head]

    @property
    def start_ms(self) -> int:
        """Stream time of the oldest audio held (rounded up to a whole ms)."""
        return -(-self._origin // _SAMPLES_PER_MS)

    @property
    def end_ms(self) -> int:
        """Stream time at the end of the audio appended so far (rounded down)."""
        return (self._origin + self._tail - self._head) // _SAMPLES_PER_MS

    @property
    def held_samples(self) -> int:
        return self._tail - self._head

    def append(self, samples: Audio) -> None:
        """Add the next samples of the stream."""
        data = _mono(samples)
        if len(data) >= self._max:  # keep only the newest max_seconds
            self._origin += self.held_samples + len(data) - self._max
            data = data[len(data) - self._max :]
            self._head = self._tail = 0
        overflow = self.held_samples + len(data) - self._max
        if overflow > 0:
            self._head += overflow
            self._origin += overflow
        if self._tail + len(data) > len(self._data):
            self._make_room(len(data))
        self._data[self._tail : self._tail + len(data)] = data
        self._tail += len(data)

    def slice(self, start_ms: int, end_ms: int) -> Audio:
        """A copy of the audio in ``[start_ms, end_ms)``. Raises ``ValueError``
        for a range not (or no longer) held."""
        if not self.start_ms <= start_ms <= end_ms <= self.end_ms:
            raise ValueError(
                f"audio [{start_ms}, {end_ms}) ms is not held; "
                f"the buffer holds [{self.start_ms}, {self.end_ms}) ms"
            )
        first = self._head + start_ms * _SAMPLES_PER_MS - self._origin
        last = self._head + end_ms * _SAMPLES_PER_MS - self._origin
        return self._data[first:last].copy()

    def discard_before(self, ms: int) -> None:
        """Forget the audio before stream time ``ms`` (a no-op for audio
        already gone; never discards audio not yet appended)."""
        target = min(ms * _SAMPLES_PER_MS, self._origin + self.held_samples)
        if target > self._origin:
            self._head += target - self._origin
            self._origin = target

    def _make_room(self, incoming: int) -> None:
        """Move the held audio to the front, growing the array if needed."""
        held = self.held_samples
        size = len(self._data)
        if held + incoming > size:
            size = min(max(2 * size, held + incoming), self._max)
        data = self._data if size == len(self._data) else np.empty(size, dtype=np.float32)
        data[:held] = self._data[self._head : self._tail]
        self._data, self._head, self._tail = data, 0, held


def _mono(samples: Audio) -> Audio:
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples (one dimension), not shape {samples.shape}")
    return np.asarray(samples, dtype=np.float32)
