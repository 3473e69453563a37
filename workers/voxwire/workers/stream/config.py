"""A live stream's settings, as its client asked for them (:class:`StreamConfig`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from voxwire.core.errors import ConfigError
from voxwire.workers.engine import EngineOptions
from voxwire.workers.stream.endpointing import EndpointConfig
from voxwire_client.api import AudioEncoding, RedactMode, StreamRequest
from voxwire_client.messages import Task
from voxwire_client.options import ChannelMode, Endpointing

_LANGUAGE = re.compile(r"auto|[a-z]{2,3}")


@dataclass(frozen=True, slots=True)
class LiveTuning:
    """How a worker decodes the finals of every live stream it holds (the platform's
    ``live`` settings, the same for all its streams)."""

    context_chars: int = 0
    """A final (and a likely final) is decoded with at most this many characters of
    the stream's earlier finals as its prompt (0: none)."""
    lead_ms: int = 0
    """A final (and a likely final) is decoded after at most this much of the stream
    audio before it, and keeps what was said after it (0: alone;
    :mod:`voxwire.workers.stream.lead`)."""


UNTUNED = LiveTuning()
"""Finals decoded alone, without the stream's earlier text."""


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """Per-session settings of a live stream, as the gateway resolved them. Override
    with ``dataclasses.replace``.

    Raises :class:`voxwire.core.errors.ConfigError` for a language that is no code."""

    language: str = "en"
    endpointing: Endpointing = field(default_factory=Endpointing)
    redact: RedactMode = RedactMode.OFF
    model: str | None = None
    """The model's name, written on every segment."""
    encoding: AudioEncoding = AudioEncoding.PCM16  # sample_rate, frame_ms: voxwire.audio.codecs
    sample_rate: int = 16_000
    frame_ms: int = 20
    diarize: bool = False
    max_speakers: int | None = None
    vocabulary: tuple[str, ...] = ()
    """Words the stream expects: they open the decoder's prompt (EngineOptions)."""
    task: Task = Task.TRANSCRIBE
    """``translate``: the finals in English (EngineOptions.task)."""
    labels: tuple[str, ...] = ()
    """With separate channels: each channel's label (the chunks interleave as many
    channels); empty: one channel, mono."""

    @property
    def channels(self) -> int:
        """How many channels each chunk interleaves."""
        return max(1, len(self.labels))

    def __post_init__(self) -> None:
        if not isinstance(self.language, str) or not _LANGUAGE.fullmatch(self.language):
            raise ConfigError(
                f"stream setting language={self.language!r} must be a language code "
                "such as 'en', or 'auto'",
                hint="change language in the session configuration",
            )

    def engine_options(self, options: EngineOptions) -> EngineOptions:
        """``options`` with the stream's language, vocabulary and task."""
        return replace(
            options, language=self.language, vocabulary=self.vocabulary, task=self.task.value
        )

    @property
    def endpointer(self) -> EndpointConfig:
        """The endpointer's settings."""
        return EndpointConfig.of(self.endpointing)


def stream_config(request: StreamRequest) -> StreamConfig:
    """The pipeline's settings for a stream as a client asked for it (and the
    gateway resolved: a language, a redaction)."""
    bounds = request.diarize
    return StreamConfig(
        language=request.language or "en",
        endpointing=request.endpointing,
        redact=request.redact or RedactMode.OFF,
        model=request.model,
        encoding=request.encoding,
        sample_rate=request.rate,
        frame_ms=request.frame_ms,
        diarize=bounds is not None,
        max_speakers=bounds.max_speakers if bounds is not None else None,
        vocabulary=request.vocabulary,
        task=request.task,
        labels=request.labels_for(request.audio_channels)
        if request.channels is ChannelMode.SEPARATE
        else (),
    )
