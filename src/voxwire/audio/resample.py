"""Resample a stream of mono float32 samples, chunk by chunk, band-limited.

:class:`StreamResampler` wraps FFmpeg's libswresample (PyAV's
``AudioResampler``): a windowed-sinc filter whose state runs from chunk to
chunk, so chunk edges leave no clicks, and whose delay is taken out (an
impulse at input sample *n* comes out at *n* times the ratio). It holds back a
few output samples (2 ms from 8 kHz) until the next chunk; the last of them are
dropped when a stream ends. :func:`resample` does a whole signal at once.
"""

from __future__ import annotations

import av
import numpy as np

from voxwire.audio.samples import SAMPLE_RATE, Audio


class StreamResampler:
    """``source_rate`` chunks in, ``target_rate`` samples out."""

    def __init__(self, source_rate: int, target_rate: int = SAMPLE_RATE) -> None:
        self.source_rate = source_rate
        self.target_rate = target_rate
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=target_rate)

    def push(self, samples: Audio) -> Audio:
        """The resampled samples that ``samples`` complete."""
        if self.source_rate == self.target_rate or samples.size == 0:
            return samples.astype(np.float32, copy=False)
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1),
            format="flt",
            layout="mono",
        )
        frame.sample_rate = self.source_rate
        return _joined(self._resampler.resample(frame))

    def flush(self) -> Audio:
        """The samples still held back (call once, at the end of the signal)."""
        if self.source_rate == self.target_rate:
            return np.empty(0, dtype=np.float32)
        return _joined(self._resampler.resample(None))


def resample(samples: Audio, source_rate: int, target_rate: int = SAMPLE_RATE) -> Audio:
    """All of ``samples`` at ``target_rate``."""
    resampler = StreamResampler(source_rate, target_rate)
    return np.concatenate([resampler.push(samples), resampler.flush()])


def _joined(frames: list[av.AudioFrame]) -> Audio:
    if not frames:
        return np.empty(0, dtype=np.float32)
    return np.concatenate(
        [np.asarray(f.to_ndarray(), dtype=np.float32).reshape(-1) for f in frames]
    )
