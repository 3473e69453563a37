"""Who speaks in each 17 ms of a 10 s window, overlap included: pyannote's
segmentation-3.0 run in numpy.

The network (PyanNet, Bredin 2023, "pyannote.audio 2.1 speaker diarization
pipeline: principle, benchmark, and recipe"; weights MIT, see
:mod:`voxwire.models.segmentation`) reads 10 s of 16 kHz audio:

1. SincNet: the waveform normalized over the window, 80 parametrized band-pass
   filters of 251 taps (40 cosine and 40 sine, Ravanelli & Bengio's sinc
   filters as Asteroid defines them) every 10 samples, their absolute value,
   then two 5-tap convolutions (60 channels); each stage max-pooled by 3,
   instance-normalized and through a leaky ReLU;
2. four bidirectional LSTM layers of 128, two linear layers of 128 (leaky ReLU);
3. 7 classes per frame, the *powerset* of up to 3 local speakers with at most 2
   at once: nobody, 1, 2, 3, 1+2, 1+3, 2+3.

A window gives :data:`FRAMES` frames, one every :data:`FRAME_STEP` samples;
frame ``i`` is centred on sample ``FRAME_CENTRE + FRAME_STEP * i``. The local
speakers of two windows are not the same people: their numbering is the
window's own (:mod:`.overlap` links them across windows).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from voxwire.audio.samples import SAMPLE_RATE
from voxwire.models import segmentation as model_files

Array = npt.NDArray[np.float32]

WINDOW_SAMPLES = 10 * SAMPLE_RATE
FRAMES = 589
FRAME_STEP = 270
"""Samples between two frames (16.875 ms)."""
FRAME_CENTRE = 495
"""The sample on which a window's first frame is centred."""
LOCAL_SPEAKERS = 3
_SINC_TAPS = 251
_SINC_STRIDE = 10
_MIN_LOW_HZ = 50.0
_MIN_BAND_HZ = 50.0
_EPS = 1e-5
_SLOPE = 0.01  # of the leaky ReLU


def powerset_classes() -> npt.NDArray[np.bool_]:
    """(7, 3): which local speakers each class means, in the network's order."""
    sets = [c for size in range(3) for c in itertools.combinations(range(LOCAL_SPEAKERS), size)]
    table = np.zeros((len(sets), LOCAL_SPEAKERS), dtype=np.bool_)
    for row, members in enumerate(sets):
        table[row, list(members)] = True
    return table


def _leaky(x: Array) -> Array:
    result: Array = np.where(x >= 0, x, _SLOPE * x).astype(np.float32)
    return result


def _instance_norm(x: Array, weight: Array, bias: Array) -> Array:
    """``x`` (batch, time, channels) normalized over time, per channel."""
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    result: Array = ((x - mean) / np.sqrt(var + _EPS) * weight + bias).astype(np.float32)
    return result


def _max_pool3(x: Array) -> Array:
    frames = x.shape[1] // 3
    result: Array = x[:, : frames * 3].reshape(x.shape[0], frames, 3, x.shape[2]).max(axis=2)
    return result


def _conv(x: Array, weight: Array, bias: Array) -> Array:
    """``x`` (batch, time, in) through a 1-D convolution ``weight`` (out, in, taps)."""
    out, inputs, taps = weight.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, taps, axis=1)  # (b, t, in, taps)
    flat = windows.reshape(x.shape[0], -1, inputs * taps)
    return (flat @ weight.transpose(1, 2, 0).reshape(inputs * taps, out) + bias).astype(np.float32)


def sinc_filters(low_hz: Array, band_hz: Array, window: Array, n: Array) -> Array:
    """(80, 251): the band-pass filters of the learnt edges (Hz) ``low_hz`` and
    ``band_hz`` (40, 1); ``window`` is half a Hamming window and ``n`` the times
    (radians per Hz) of the filters' left half."""
    low = _MIN_LOW_HZ + np.abs(low_hz)
    high = np.clip(low + _MIN_BAND_HZ + np.abs(band_hz), _MIN_LOW_HZ, SAMPLE_RATE / 2)
    band = (high - low)[:, 0]
    ft_low, ft_high = low @ n, high @ n
    half = n / 2
    cos_left = (np.sin(ft_high) - np.sin(ft_low)) / half * window
    sin_left = (np.cos(ft_low) - np.cos(ft_high)) / half * window
    centre = 2 * band[:, None]
    cos = np.concatenate([cos_left, centre, cos_left[:, ::-1]], axis=1)
    sin = np.concatenate([sin_left, np.zeros_like(centre), -sin_left[:, ::-1]], axis=1)
    filters: Array = np.concatenate([cos, sin]) / np.concatenate([2 * band, 2 * band])[:, None]
    return filters.astype(np.float32)


@dataclass(frozen=True, slots=True)
class _Lstm:
    w_ih: Array
    w_hh: Array
    bias: Array

    def run(self, x: Array, reverse: bool) -> Array:
        """One direction of one layer over ``x`` (batch, time, in)."""
        batch, steps, _ = x.shape
        hidden = self.w_hh.shape[1]
        gates_in = x @ self.w_ih.T + self.bias
        w_hh = np.ascontiguousarray(self.w_hh.T)
        h = np.zeros((batch, hidden), dtype=np.float32)
        c = np.zeros((batch, hidden), dtype=np.float32)
        out = np.empty((batch, steps, hidden), dtype=np.float32)
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        for t in order:  # PyTorch's gate order: i, f, g, o
            gates = gates_in[:, t] + h @ w_hh
            sig = _sigmoid(gates)
            c = sig[:, hidden : 2 * hidden] * c + sig[:, :hidden] * np.tanh(
                gates[:, 2 * hidden : 3 * hidden]
            )
            h = sig[:, 3 * hidden :] * np.tanh(c)
            out[:, t] = h
        return out


def _sigmoid(x: Array) -> Array:
    result: Array = (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)
    return result


class Segmenter:
    """segmentation-3.0 on batches of 10 s windows."""

    def __init__(self, weights: model_files.Weights) -> None:
        w = weights
        self._w = w
        self._filters = sinc_filters(
            w["sincnet.conv1d.0.filterbank.low_hz_"],
            w["sincnet.conv1d.0.filterbank.band_hz_"],
            w["sincnet.conv1d.0.filterbank.window_"],
            w["sincnet.conv1d.0.filterbank.n_"],
        )
        self._layers = [
            (
                _Lstm(
                    w[f"lstm.weight_ih_l{k}"],
                    w[f"lstm.weight_hh_l{k}"],
                    w[f"lstm.bias_ih_l{k}"] + w[f"lstm.bias_hh_l{k}"],
                ),
                _Lstm(
                    w[f"lstm.weight_ih_l{k}_reverse"],
                    w[f"lstm.weight_hh_l{k}_reverse"],
                    w[f"lstm.bias_ih_l{k}_reverse"] + w[f"lstm.bias_hh_l{k}_reverse"],
                ),
            )
            for k in range(model_files.LSTM_LAYERS)
        ]

    @classmethod
    def load(cls) -> Segmenter:
        """From the cache (:mod:`voxwire.models.segmentation`), installed first if missing."""
        return cls(model_files.MODEL.load_or_install())

    def log_probabilities(self, windows: Array) -> Array:
        """(batch, :data:`FRAMES`, 7) log-probabilities of the powerset classes of
        ``windows`` (batch, :data:`WINDOW_SAMPLES`). One BLAS thread, as the
        speaker encoder (:meth:`.encoder.SpeakerEncoder.frame_features`)."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._forward(windows)

    def _forward(self, windows: Array) -> Array:
        w = self._w
        x = np.concatenate([self._sincnet(window[None]) for window in windows])
        for forward, backward in self._layers:
            x = np.concatenate([forward.run(x, False), backward.run(x, True)], axis=2)
        for k in (0, 1):
            x = _leaky(x @ w[f"linear.{k}.weight"].T + w[f"linear.{k}.bias"])
        logits = x @ w["classifier.weight"].T + w["classifier.bias"]
        shifted = logits - logits.max(axis=2, keepdims=True)
        result: Array = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
        return result.astype(np.float32)

    def _sincnet(self, window: Array) -> Array:
        """(1, :data:`FRAMES`, 60) features of one window (1, :data:`WINDOW_SAMPLES`);
        one at a time, as the filters' input is 16 MB a window."""
        w = self._w
        x = _instance_norm(
            window[:, :, None].astype(np.float32),
            w["sincnet.wav_norm1d.weight"],
            w["sincnet.wav_norm1d.bias"],
        )
        taps = np.lib.stride_tricks.sliding_window_view(x[:, :, 0], _SINC_TAPS, axis=1)
        x = np.abs(taps[:, ::_SINC_STRIDE] @ self._filters.T)
        for k in (0, 1, 2):
            if k:
                x = _conv(x, w[f"sincnet.conv1d.{k}.weight"], w[f"sincnet.conv1d.{k}.bias"])
            x = _instance_norm(
                _max_pool3(x), w[f"sincnet.norm1d.{k}.weight"], w[f"sincnet.norm1d.{k}.bias"]
            )
            x = _leaky(x)
        return x

    def activity(self, windows: Array) -> npt.NDArray[np.bool_]:
        """(batch, :data:`FRAMES`, 3): whether each local speaker talks in each
        frame, from the most likely class."""
        best = self.log_probabilities(windows).argmax(axis=2)
        found: npt.NDArray[np.bool_] = _classes()[best]
        return found


@cache
def _classes() -> npt.NDArray[np.bool_]:
    return powerset_classes()
