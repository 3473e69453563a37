"""Engines whose calls liveness watches (:class:`voxwire.core.liveness.Calls`).

Every call of a :class:`WatchedEngine` is a call under way until it returns or
raises, with a bound derived from the audio it was given: :data:`FLOOR_S` plus
:data:`PER_AUDIO_S` times the audio's length. A 30 s window that takes minutes,
or a decode that never returns, turns ``/healthz`` to 503; a two-hour file that
is decoded at any reasonable speed does not. The engine is otherwise unchanged:
what it can do besides ``transcribe`` (``detect_language``, ``transcribe_batch``)
it still can, watched too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.liveness import Calls
from voxwire.workers.engine import Engine, EngineOptions, Segment, SegmentCallback

FLOOR_S = 120.0
"""What any engine call may take: a model's first call, a busy machine."""
PER_AUDIO_S = 10.0
"""And per second of audio: ten times slower than real time is past any engine here."""


def bound_s(audio_s: float) -> float:
    """How long an engine call on ``audio_s`` seconds of audio may run."""
    return FLOOR_S + PER_AUDIO_S * audio_s


class WatchedEngine:
    """``engine``, each call of it entered in ``calls`` while it runs."""

    def __init__(self, engine: Engine, calls: Calls) -> None:
        self._engine, self._calls = engine, calls
        self.name = engine.name

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        seconds = audio.size / SAMPLE_RATE
        with self._calls.running(self._what(seconds), bound_s(seconds)):
            return self._engine.transcribe(audio, options, on_segment, abort)

    def close(self) -> None:
        self._engine.close()

    def __getattr__(self, name: str) -> Any:
        """The engine's other abilities, watched when they decode."""
        found = getattr(self._engine, name)  # AttributeError: the engine has none
        if name == "detect_language":

            def detect_language(audio: Audio, options: EngineOptions) -> tuple[str, float]:
                seconds = min(audio.size / SAMPLE_RATE, 30.0)
                what = self._what(seconds, "language detection")
                with self._calls.running(what, bound_s(seconds)):
                    return found(audio, options)  # type: ignore[no-any-return]

            return detect_language
        if name == "transcribe_batch":

            def transcribe_batch(clips: list[Audio], options: EngineOptions) -> list[list[Segment]]:
                seconds = sum(c.size for c in clips) / SAMPLE_RATE
                what = self._what(seconds, f"batch of {len(clips)} clips")
                with self._calls.running(what, bound_s(seconds)):
                    return found(clips, options)  # type: ignore[no-any-return]

            return transcribe_batch
        return found

    def _what(self, seconds: float, kind: str = "call") -> str:
        return f"a {self.name} {kind} on {seconds:.1f} s of audio"
