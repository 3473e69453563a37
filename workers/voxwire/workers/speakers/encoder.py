"""The GE2E speaker encoder, run in numpy: 1.6 s of speech in, a voice's 256 numbers out.

The network (Wan et al. 2018, as Resemblyzer trained it): a 3-layer LSTM over
the 40-channel mel frames (:mod:`.features`), 256 units per layer; the last
layer's final hidden state goes through a 256 x 256 linear layer and a ReLU,
and is scaled to unit length. Its inputs are *partial utterances* of 160 frames
(1.6 s). An utterance's embedding is the mean of its partials' (160 frames every
80: half overlapping), scaled to unit length again. Two embeddings of one voice
have a cosine similarity near 0.8-0.9; of two voices, lower.

LSTM step (PyTorch's gate order i, f, g, o)::

    i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)

The input projection of a whole layer is one matrix product over every frame
of every partial; only the recurrent product runs step by step, batched over
the partials. The weights: :mod:`voxwire.models.speaker`.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from voxwire.core.samples import Audio
from voxwire.models import speaker
from voxwire.workers.speakers.features import Mel, mel_spectrogram, normalize_volume

PARTIAL_FRAMES = 160
"""Mel frames in one partial utterance: 1.6 s."""
PARTIAL_HOP = 80
"""Frames between two partials of an utterance: they overlap by half."""
MIN_COVERAGE = 0.75
"""A last partial is kept when speech fills at least this share of it."""
EMBEDDING_SIZE = 256

Embeddings = npt.NDArray[np.float32]
"""``(n, 256)`` unit vectors."""


def _sigmoid(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    result: npt.NDArray[np.float32] = 0.5 * (1.0 + np.tanh(0.5 * x))
    return result


def unit(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row (or the vector) scaled to length 1 (zeros stay zeros)."""
    norm = np.linalg.norm(vectors, axis=-1, keepdims=True)
    result: npt.NDArray[np.float32] = (vectors / np.maximum(norm, 1e-12)).astype(np.float32)
    return result


class SpeakerEncoder:
    """The encoder with its weights loaded; thread-safe (it keeps no state)."""

    def __init__(self, weights: speaker.Weights) -> None:
        self._layers = [
            (
                np.ascontiguousarray(weights[f"lstm.weight_ih_l{n}"].T),
                np.ascontiguousarray(weights[f"lstm.weight_hh_l{n}"].T),
                weights[f"lstm.bias_ih_l{n}"] + weights[f"lstm.bias_hh_l{n}"],
            )
            for n in range(speaker.LAYERS)
        ]
        self._linear = (np.ascontiguousarray(weights["linear.weight"].T), weights["linear.bias"])

    @classmethod
    def load(cls) -> SpeakerEncoder:
        """The encoder, its weights installed into the cache on first use."""
        return cls(speaker.MODEL.load_or_install())

    def embed_partials(self, mels: npt.NDArray[np.float32]) -> Embeddings:
        """``(batch, frames, 40)`` mel frames -> ``(batch, 256)`` unit embeddings.

        One BLAS thread: the products are small, and several BLAS threads on
        cores that the engines keep busy made it 10 to 25 times slower here."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._forward(mels)

    def _forward(self, mels: npt.NDArray[np.float32]) -> Embeddings:
        batch, steps, _ = mels.shape
        x = mels.astype(np.float32)
        h = np.zeros((batch, EMBEDDING_SIZE), np.float32)
        for w_ih, w_hh, bias in self._layers:
            projected = (x.reshape(batch * steps, -1) @ w_ih + bias).reshape(batch, steps, -1)
            h = np.zeros((batch, EMBEDDING_SIZE), np.float32)
            c = np.zeros((batch, EMBEDDING_SIZE), np.float32)
            outputs = np.empty((batch, steps, EMBEDDING_SIZE), np.float32)
            for t in range(steps):
                gates = projected[:, t] + h @ w_hh
                i, f, g, o = np.split(gates, 4, axis=1)
                c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                h = _sigmoid(o) * np.tanh(c)
                outputs[:, t] = h
            x = outputs
        weight, bias = self._linear
        return unit(np.maximum(h @ weight + bias, 0.0))

    def embed_windows(self, mel: Mel, starts: list[int]) -> Embeddings:
        """The embeddings of the 160-frame windows of ``mel`` starting at ``starts``
        (frames; a window past the end is padded with silence)."""
        if not starts:
            return np.zeros((0, EMBEDDING_SIZE), np.float32)
        end = max(starts) + PARTIAL_FRAMES
        if end > len(mel):
            mel = np.pad(mel, ((0, end - len(mel)), (0, 0)))
        windows = np.stack([mel[s : s + PARTIAL_FRAMES] for s in starts])
        return self.embed_partials(windows)

    def embed_utterance(self, audio: Audio) -> npt.NDArray[np.float32]:
        """One unit embedding for ``audio`` (16 kHz, one voice): its partials' mean."""
        mel = mel_spectrogram(normalize_volume(audio))
        return unit(self.embed_windows(mel, partial_starts(len(mel))).mean(axis=0))


def partial_starts(frames: int) -> list[int]:
    """Where an utterance of ``frames`` mel frames is cut into partials: every
    :data:`PARTIAL_HOP` frames; a last partial that speech fills less than
    :data:`MIN_COVERAGE` is dropped, unless it is the only one."""
    starts = list(range(0, max(1, frames - PARTIAL_FRAMES + PARTIAL_HOP), PARTIAL_HOP))
    last = starts[-1]
    if len(starts) > 1 and (frames - last) / PARTIAL_FRAMES < MIN_COVERAGE:
        starts.pop()
    return starts


@cache
def shared_encoder() -> SpeakerEncoder:
    """One encoder per process, loaded (and its weights installed) on first use."""
    return SpeakerEncoder.load()
