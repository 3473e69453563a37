"""A live stream's settings, as its client asked for them (:class:`StreamConfig`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from voxwire.core.errors import ConfigError
from voxwire.workers.engine import EngineOptions
from voxwire.workers.stream.endpointing import EndpointConfig
from voxwire_client.api import AudioCodec, RedactMode, StreamRequest
from voxwire_client.messages import Task

_LANGUAGE = re.compile(r"auto|[a-z]{2,3}")


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """Per-session settings of a live stream. Override with ``dataclasses.replace``.

    Raises :class:`voxwire.core.errors.ConfigError` for values out of range."""

    language: str = "en"
    min_silence_ms: int = 600
    min_speech_ms: int = 250
    partial_interval_s: float = 2.0
    max_segment_s: float = 30.0
    vad_threshold: float = 0.5
    redact: RedactMode = RedactMode.OFF
    model: str | None = None
    """The model's name, written on every segment."""
    codec: AudioCodec = AudioCodec.PCM16  # and frame_ms: see voxwire.audio.codecs
    frame_ms: int = 20
    diarize: bool = False
    max_speakers: int | None = None
    vocabulary: tuple[str, ...] = ()
    """Words the stream expects: they open the decoder's prompt (EngineOptions)."""
    task: Task = Task.TRANSCRIBE
    """``translate``: the finals in English (EngineOptions.task)."""

    def __post_init__(self) -> None:
        if not isinstance(self.language, str) or not _LANGUAGE.fullmatch(self.language):
            raise ConfigError(
                f"stream setting language={self.language!r} must be a language code "
                "such as 'en', or 'auto'",
                hint="change language in the session configuration",
            )
        if not (math.isfinite(self.vad_threshold) and 0.0 < self.vad_threshold < 1.0):
            raise ConfigError(
                f"stream setting vad_threshold={self.vad_threshold!r} must lie between 0 and 1",
                hint="change vad_threshold in the session configuration",
            )
        self.endpointing  # noqa: B018 - validates the other settings

    def engine_options(self, options: EngineOptions) -> EngineOptions:
        """``options`` with the stream's language, vocabulary and task."""
        return replace(
            options, language=self.language, vocabulary=self.vocabulary, task=self.task.value
        )

    @property
    def endpointing(self) -> EndpointConfig:
        """The endpointer's settings (raises :class:`ConfigError` when out of range)."""
        return EndpointConfig(
            threshold=self.vad_threshold,
            min_silence_ms=self.min_silence_ms,
            min_speech_ms=self.min_speech_ms,
            partial_interval_s=self.partial_interval_s,
            max_segment_s=self.max_segment_s,
        )


def stream_config(request: StreamRequest) -> StreamConfig:
    """The pipeline's settings for a stream as a client asked for it."""
    settings = request.model_dump(exclude={"prompts", "redact"})
    return StreamConfig(**settings, redact=request.redact or RedactMode.OFF)
