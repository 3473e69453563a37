"""The speaker encoder's input: a mel power spectrogram, as GE2E was trained on.

16 kHz audio, 25 ms Hann windows (400 samples) every 10 ms (160), the frame
centred on its sample (zero padding at both ends), the power spectrum through
40 Slaney mel filters (as ``librosa.feature.melspectrogram`` computes it, which
Resemblyzer's ``audio.py`` calls): one row of 40 values per 10 ms. It is not
logarithmic, so the level matters: :func:`normalize_volume` raises quiet audio to
-30 dBFS first, as Resemblyzer's preprocessing does.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from voxwire.core.samples import Audio
from voxwire.models.convert import mel_filters

N_FFT = 400
HOP = 160
"""Samples between frames: 10 ms."""
N_MELS = 40
FRAMES_PER_SECOND = 100
TARGET_DBFS = -30.0
_INT16_MAX = 2**15 - 1

Mel = npt.NDArray[np.float32]
"""``(frames, 40)``: one row per 10 ms."""


@cache
def _filters() -> npt.NDArray[np.float32]:
    return mel_filters(N_MELS, n_fft=N_FFT).T.astype(np.float32)  # (201, 40)


@cache
def _window() -> npt.NDArray[np.float32]:
    n = np.arange(N_FFT)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)).astype(np.float32)  # periodic Hann


def normalize_volume(audio: Audio, target_dbfs: float = TARGET_DBFS) -> Audio:
    """``audio`` raised to ``target_dbfs`` RMS when quieter; never lowered."""
    if audio.size == 0:
        return audio
    rms = float(np.sqrt(np.mean(np.square(audio.astype(np.float64) * _INT16_MAX))))
    if rms <= 0:
        return audio
    change = target_dbfs - 20 * np.log10(rms / _INT16_MAX)
    if change <= 0:
        return audio
    return (audio * np.float32(10 ** (change / 20))).astype(np.float32)


def mel_spectrogram(audio: Audio) -> Mel:
    """``(1 + len(audio) // 160, 40)`` mel power frames of 16 kHz ``audio``."""
    padded = np.pad(np.asarray(audio, dtype=np.float32), N_FFT // 2)
    count = 1 + (len(padded) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(
        padded, shape=(count, N_FFT), strides=(padded.strides[0] * HOP, padded.strides[0])
    )
    spectrum = np.fft.rfft(frames * _window(), axis=1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    mel: Mel = power @ _filters()
    return mel
