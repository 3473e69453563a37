"""The CAM++ speaker encoder, run in numpy: speech in, a voice's 192 numbers out.

The network (Wang et al. 2023, as 3D-Speaker defines it) reads the 80-channel
filterbank frames of :mod:`.features`:

1. a 2-D convolutional front end over frequency and time (a 3x3 convolution,
   two stages of two residual blocks, the first block of each halving the
   frequencies, a last 3x3 convolution halving them again: 32 channels x 10
   frequencies);
2. a TDNN layer (5 taps, every second frame: one row per 20 ms), then three
   densely connected blocks of 12, 24 and 16 layers (each adds 32 channels: a
   1x1 bottleneck of 128 and a 3-tap convolution whose output is masked by a
   gate computed from the mean of the whole input and of its 100-frame
   segments, the *context-aware mask*), each block followed by a 1x1 layer that
   halves the channels; batch norms and ReLUs before each convolution;
3. statistics pooling (mean and standard deviation of each of 512 channels over
   the frames) and a 1x1 layer to 192 numbers, batch-normalized.

Everything before the pooling is computed once for a whole recording
(:meth:`SpeakerEncoder.frame_features`, in pieces of at most
:data:`CHUNK_SAMPLES`); a voice's embedding is the pooling of the rows where it
talks (:meth:`SpeakerEncoder.embed_spans`). Embeddings are scaled to unit
length: two of one voice have a cosine similarity near 0.7-0.9, of two voices
near 0-0.3. The weights: :mod:`voxwire.models.speaker`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.models import speaker
from voxwire.workers.engine import TranscriptionAborted
from voxwire.workers.speakers.features import HOP, fbank

EMBEDDING_SIZE = 192
CHANNELS = 512
"""Of a row of frame features."""
CHUNK_SAMPLES = 10 * SAMPLE_RATE
"""The longest piece of audio the network reads at once."""
ROW_STEP = 2 * HOP
"""Samples between two rows of frame features (20 ms)."""
ROW_CENTRE = 200
"""The sample on which a piece's first row is centred."""
_EPS = 1e-5
_CONTEXT_SEGMENT = 100

Array = npt.NDArray[np.float32]
Embeddings = npt.NDArray[np.float32]
"""``(n, 192)`` unit vectors."""
_NO_ROWS = np.zeros((0, CHANNELS), np.float32)


def unit(vectors: Array) -> Array:
    """Each row (or the vector) scaled to length 1 (zeros stay zeros)."""
    norm = np.linalg.norm(vectors, axis=-1, keepdims=True)
    result: Array = (vectors / np.maximum(norm, 1e-12)).astype(np.float32)
    return result


@dataclass(frozen=True, slots=True)
class FrameFeatures:
    """A recording's rows of 512 channels, before the pooling."""

    values: Array
    """``(rows, 512)``."""
    centres: npt.NDArray[np.int64]
    """The sample each row is centred on."""


def _relu(x: Array) -> Array:
    return np.maximum(x, np.float32(0))


def _sigmoid(x: Array) -> Array:
    result: Array = (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)
    return result


class SpeakerEncoder:
    """CAM++ with its weights loaded; thread-safe (it keeps no state)."""

    def __init__(self, weights: speaker.Weights) -> None:
        self._w = weights
        self._norms: dict[str, tuple[Array, Array]] = {}
        for name in weights:
            if name.endswith(".running_mean"):
                base = name.removesuffix(".running_mean")
                scale = 1.0 / np.sqrt(weights[f"{base}.running_var"] + _EPS)
                shift = -weights[name] * scale
                if f"{base}.weight" in weights:
                    scale, shift = (
                        scale * weights[f"{base}.weight"],
                        shift * weights[f"{base}.weight"] + weights[f"{base}.bias"],
                    )
                self._norms[base] = (scale.astype(np.float32), shift.astype(np.float32))

    @classmethod
    def load(cls) -> SpeakerEncoder:
        """The encoder, its weights installed into the cache on first use."""
        return cls(speaker.MODEL.load_or_install())

    def frame_features(
        self, audio: Audio, abort: Callable[[], bool] = lambda: False
    ) -> FrameFeatures:
        """All the rows of ``audio`` (16 kHz) (:class:`FrameReader`)."""
        return FrameReader(self, audio, abort).covering(0, len(audio))

    def rows_of(self, audio: Audio, start: int) -> FrameFeatures:
        """The rows of one piece ``audio`` that starts at sample ``start`` of its
        recording. One BLAS thread: the products are small, and several BLAS
        threads on cores that the engines keep busy are much slower."""
        features = fbank(audio)
        if len(features) < 2:
            return FrameFeatures(_NO_ROWS, np.zeros(0, np.int64))
        with threadpool_limits(limits=1, user_api="blas"):
            rows = self._rows(features)
        return FrameFeatures(rows, start + ROW_CENTRE + ROW_STEP * np.arange(len(rows)))

    def pool(self, rows: Array) -> Array:
        """The unit embedding of ``rows`` (n, 512) of frame features."""
        spread = rows.std(axis=0, ddof=1) if len(rows) > 1 else np.full(CHANNELS, 1e-2)
        stats = np.concatenate([rows.mean(axis=0), spread]).astype(np.float32)
        scale, shift = self._norms["xvector.dense.nonlinear.batchnorm"]
        dense = self._w["xvector.dense.linear.weight"][:, :, 0] @ stats
        return unit(dense * scale + shift)

    def embed_spans(
        self, features: FrameFeatures, spans: list[list[tuple[int, int]]]
    ) -> Embeddings:
        """One unit embedding per list of ``[start, end)`` sample spans: the pooling
        of the rows centred inside them (zeros where no row is)."""
        out = np.zeros((len(spans), EMBEDDING_SIZE), np.float32)
        for n, voice in enumerate(spans):
            chosen = [
                np.arange(*np.searchsorted(features.centres, (start, end))) for start, end in voice
            ]
            rows = np.unique(np.concatenate(chosen)) if chosen else np.zeros(0, np.int64)
            if len(rows):
                out[n] = self.pool(features.values[rows])
        return out

    def embed_utterance(self, audio: Audio) -> Array:
        """One unit embedding for ``audio`` (16 kHz, one voice)."""
        features = self.frame_features(audio)
        if not len(features.values):
            return np.zeros(EMBEDDING_SIZE, np.float32)
        return self.pool(features.values)

    def _norm(self, x: Array, name: str, axis: int = 1) -> Array:
        scale, shift = self._norms[name]
        shape = [1] * x.ndim
        shape[axis] = -1
        result: Array = x * scale.reshape(shape) + shift.reshape(shape)
        return result

    def _conv2d(self, x: Array, name: str, stride: int = 1) -> Array:
        """``x`` (channels, freq, time) through a 3x3 (padded) or 1x1 convolution,
        ``stride`` on frequency only: one product per tap of the kernel, added up
        (four times faster here than one product over a copy of every tap's input)."""
        weight = self._w[f"{name}.weight"]
        out, inputs, kf, kt = weight.shape
        _, freq, time = x.shape
        pad = kf // 2
        padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad))) if pad else x
        rows = (freq - 1) // stride + 1
        total = np.zeros((out, rows * time), np.float32)
        for i in range(kf):
            for j in range(kt):
                tap = padded[:, i : i + stride * (rows - 1) + 1 : stride, j : j + time]
                total += weight[:, :, i, j] @ tap.reshape(inputs, rows * time)
        result: Array = total.reshape(out, rows, time)
        return result

    def _residual(self, x: Array, name: str, stride: int) -> Array:
        y = _relu(self._norm(self._conv2d(x, f"{name}.conv1", stride), f"{name}.bn1", 0))
        y = self._norm(self._conv2d(y, f"{name}.conv2"), f"{name}.bn2", 0)
        if f"{name}.shortcut.0.weight" in self._w:
            x = self._norm(self._conv2d(x, f"{name}.shortcut.0", stride), f"{name}.shortcut.1", 0)
        return _relu(y + x)

    def _conv1d(
        self, x: Array, name: str, *, stride: int = 1, dilation: int = 1, padding: int = 0
    ) -> Array:
        """``x`` (channels, time) through a 1-D convolution."""
        weight = self._w[f"{name}.weight"]
        out, inputs, taps = weight.shape
        if taps == 1:
            y = weight[:, :, 0] @ x
        else:
            padded = np.pad(x, ((0, 0), (padding, padding)))
            span = dilation * (taps - 1) + 1
            windows = np.lib.stride_tricks.sliding_window_view(padded, span, axis=1)
            windows = windows[:, ::stride, ::dilation]  # (in, time, taps)
            cols = windows.transpose(1, 0, 2).reshape(windows.shape[1], inputs * taps)
            y = (cols @ weight.reshape(out, -1).T).T
        if f"{name}.bias" in self._w:
            y = y + self._w[f"{name}.bias"][:, None]
        result: Array = y.astype(np.float32)
        return result

    def _rows(self, features: Array) -> Array:
        """``(frames, 80)`` filterbank frames -> ``(ceil(frames / 2), 512)`` rows."""
        x = self._conv2d(features.T[None], "head.conv1")
        x = _relu(self._norm(x, "head.bn1", 0))
        for stage in ("layer1", "layer2"):
            x = self._residual(x, f"head.{stage}.0", 2)
            x = self._residual(x, f"head.{stage}.1", 1)
        x = _relu(self._norm(self._conv2d(x, "head.conv2", 2), "head.bn2", 0))
        x = x.reshape(-1, x.shape[2])  # (32 x 10, time)
        x = self._conv1d(x, "xvector.tdnn.linear", stride=2, padding=2)
        x = _relu(self._norm(x, "xvector.tdnn.nonlinear.batchnorm", 0))
        for number, (layers, dilation) in enumerate(speaker.DENSE_BLOCKS, 1):
            for layer in range(1, layers + 1):
                x = np.concatenate([x, self._dense_layer(x, number, layer, dilation)])
            transit = f"xvector.transit{number}"
            x = _relu(self._norm(x, f"{transit}.nonlinear.batchnorm", 0))
            x = self._conv1d(x, f"{transit}.linear")
        x = _relu(self._norm(x, "xvector.out_nonlinear.batchnorm", 0))
        rows: Array = np.ascontiguousarray(x.T)
        return rows

    def _dense_layer(self, x: Array, block: int, layer: int, dilation: int) -> Array:
        name = f"xvector.block{block}.tdnnd{layer}"
        h = self._conv1d(_relu(self._norm(x, f"{name}.nonlinear1.batchnorm", 0)), f"{name}.linear1")
        h = _relu(self._norm(h, f"{name}.nonlinear2.batchnorm", 0))
        local = self._conv1d(
            h, f"{name}.cam_layer.linear_local", dilation=dilation, padding=dilation
        )
        context = h.mean(axis=1, keepdims=True) + _segment_means(h, _CONTEXT_SEGMENT)
        gate = _relu(self._conv1d(context, f"{name}.cam_layer.linear1"))
        gate = _sigmoid(self._conv1d(gate, f"{name}.cam_layer.linear2"))
        result: Array = local * gate
        return result


class FrameReader:
    """The rows of one recording, read in pieces of at most :data:`CHUNK_SAMPLES`
    of equal length as far as asked; the pieces before the span asked for are let
    go, so a recording of hours is never held whole (its rows take 6 MB a minute).
    ``abort`` is asked before each piece
    (:class:`~voxwire.workers.engine.TranscriptionAborted`)."""

    def __init__(
        self, encoder: SpeakerEncoder, audio: Audio, abort: Callable[[], bool] = lambda: False
    ) -> None:
        pieces = max(1, math.ceil(len(audio) / CHUNK_SAMPLES))
        self._bounds = np.linspace(0, len(audio), pieces + 1).astype(np.int64)
        self._encoder, self._audio, self._abort = encoder, audio, abort
        self._read = 0
        self._held: list[FrameFeatures] = []
        self._joined: FrameFeatures | None = None

    def covering(self, start: int, end: int) -> FrameFeatures:
        """The rows of the pieces that hold samples ``start`` to ``end``, in order
        (spans asked must not go backwards)."""
        while self._read < len(self._bounds) - 1 and self._bounds[self._read] < end:
            if self._abort():
                raise TranscriptionAborted("diarization stopped: the worker is stopping")
            lo, hi = int(self._bounds[self._read]), int(self._bounds[self._read + 1])
            self._held.append(self._encoder.rows_of(self._audio[lo:hi], lo))
            self._read += 1
            self._joined = None
        first = int(np.searchsorted(self._bounds, start, side="right")) - 1
        gone = max(0, len(self._held) - (self._read - first))
        if gone:
            self._held, self._joined = self._held[gone:], None
        if self._joined is None:
            self._joined = FrameFeatures(
                np.concatenate([f.values for f in self._held] or [_NO_ROWS]),
                np.concatenate([f.centres for f in self._held] or [np.zeros(0, np.int64)]),
            )
        return self._joined


def _segment_means(x: Array, length: int) -> Array:
    """Each column of ``x`` (channels, time) replaced by the mean of its segment of
    ``length`` columns (the last segment may be shorter)."""
    time = x.shape[1]
    segments = math.ceil(time / length)
    padded = np.pad(x, ((0, 0), (0, segments * length - time)))
    sums = padded.reshape(x.shape[0], segments, length).sum(axis=2)
    counts = np.full(segments, length, np.float32)
    counts[-1] = time - (segments - 1) * length
    result: Array = np.repeat(sums / counts, length, axis=1)[:, :time]
    return result


@cache
def shared_encoder() -> SpeakerEncoder:
    """One encoder per process, loaded (and its weights installed) on first use."""
    return SpeakerEncoder.load()
