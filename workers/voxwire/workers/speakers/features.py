"""The speaker encoder's input: 80 log-mel filterbank channels, as Kaldi computes
them and CAM++ was trained on.

16 kHz audio, frames of 25 ms (400 samples) every 10 ms (160), only whole frames
(the first starts at sample 0). Each frame: its mean removed, pre-emphasis 0.97,
Povey's window (a Hann window to the power 0.85), zero-padded to 512 samples;
the power spectrum through 80 triangular filters equally spaced on the mel scale
(``1127 ln(1 + f / 700)``) from 20 Hz to 8 kHz, then the natural log. Each
channel's mean over the audio is subtracted (the level of the recording does not
matter). ``torchaudio.compliance.kaldi.fbank(num_mel_bins=80, dither=0)`` then
the mean subtraction is what 3D-Speaker feeds the network.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from voxwire.audio.samples import SAMPLE_RATE, Audio

FRAME = 400
HOP = 160
"""Samples between frames: 10 ms."""
N_FFT = 512
N_MELS = 80
LOW_HZ = 20.0
PREEMPHASIS = 0.97

Fbank = npt.NDArray[np.float32]
"""``(frames, 80)``: one row per 10 ms."""


def _mel(hz: npt.NDArray[np.float64] | float) -> npt.NDArray[np.float64]:
    return np.asarray(1127.0 * np.log(1.0 + np.asarray(hz) / 700.0))


@cache
def _filters() -> npt.NDArray[np.float32]:
    """(257, 80): the power spectrum's bins (the last, Nyquist, unused) to mel channels."""
    low, high = _mel(LOW_HZ), _mel(SAMPLE_RATE / 2)
    step = (high - low) / (N_MELS + 1)
    bins = _mel(np.arange(N_FFT // 2) * SAMPLE_RATE / N_FFT)
    filters = np.zeros((N_FFT // 2 + 1, N_MELS))
    for k in range(N_MELS):
        left, centre, right = low + k * step, low + (k + 1) * step, low + (k + 2) * step
        rising = (bins - left) / (centre - left)
        falling = (right - bins) / (right - centre)
        filters[: N_FFT // 2, k] = np.maximum(0.0, np.minimum(rising, falling))
    return filters.astype(np.float32)


@cache
def _window() -> npt.NDArray[np.float64]:
    n = np.arange(FRAME)
    return np.asarray((0.5 - 0.5 * np.cos(2 * np.pi * n / (FRAME - 1))) ** 0.85)


def frame_count(samples: int) -> int:
    return 0 if samples < FRAME else 1 + (samples - FRAME) // HOP


def fbank(audio: Audio) -> Fbank:
    """``(frame_count(len(audio)), 80)`` mean-normalized log-mel frames of 16 kHz ``audio``."""
    count = frame_count(len(audio))
    if count == 0:
        return np.zeros((0, N_MELS), np.float32)
    samples = np.asarray(audio, dtype=np.float64) * 32768.0  # Kaldi's scale
    frames = np.lib.stride_tricks.sliding_window_view(samples, FRAME)[::HOP][:count]
    frames = frames - frames.mean(axis=1, keepdims=True)
    emphasized = frames.copy()
    emphasized[:, 1:] -= PREEMPHASIS * frames[:, :-1]
    emphasized[:, 0] -= PREEMPHASIS * frames[:, 0]
    spectrum = np.fft.rfft(emphasized * _window(), N_FFT, axis=1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    energies = np.log(np.maximum(power @ _filters(), np.finfo(np.float32).eps))
    normalized: Fbank = (energies - energies.mean(axis=0)).astype(np.float32)
    return normalized
