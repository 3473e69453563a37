"""Bodies of the gateway's HTTP API (pydantic v2 models)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from voxwire_client.messages import Message, SegmentData, SessionStatus


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class PromptSpec(_Model):
    """A phrase to listen for."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    text: str = Field(min_length=1, max_length=500)


class Endpoints(_Model):
    """Where to follow a session."""

    mqtt_url: str
    ws_url: str
    topic_filter: str


class SessionInfo(_Model):
    sid: str
    status: SessionStatus
    created_at: datetime
    filename: str | None = None
    duration_ms: int = 0
    percent: float = 0
    last_seq: int = 0
    prompts: tuple[PromptSpec, ...] = ()
    error_code: str | None = None
    error_message: str | None = None


class SessionCreated(SessionInfo):
    endpoints: Endpoints


class MatchData(_Model):
    prompt_id: str
    prompt: str
    score: float
    start_ms: int
    end_ms: int
    text: str
    highlight: str
    segment_ids: tuple[str, ...]


class TranscriptResponse(_Model):
    sid: str
    status: SessionStatus
    text: str
    language: str | None = None
    duration_ms: int = 0
    segments: tuple[SegmentData, ...]
    matches: tuple[MatchData, ...] = ()


class MessagesPage(_Model):
    """Messages of a session with ``seq`` greater than the ``after`` asked for."""

    sid: str
    messages: list[Message]
    last_seq: int


class ErrorBody(_Model):
    """Every 4xx/5xx answer of the gateway."""

    code: str
    message: str
    hint: str | None = None
    sid: str | None = None


class Health(_Model):
    status: str
    version: str
    mode: str
    workers: int
    model: str


class StreamRequest(_Model):
    """Start a live stream: ``POST /v1/streams``. Then publish PCM16LE 16 kHz mono
    chunks on ``audio/<sid>/chunk/<n>`` (n = 0, 1, 2, ...; QoS 1; well under 1 MB,
    e.g. 100 ms = 3200 bytes) and ``{"type": "end"}`` on ``audio/<sid>/control``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    language: str = "en"
    prompts: tuple[PromptSpec, ...] = ()
    min_silence_ms: int = Field(default=600, ge=100, le=10_000)
    min_speech_ms: int = Field(default=250, ge=0, le=10_000)
    partial_interval_s: float = Field(default=2.0, ge=0, le=60)
    max_segment_s: float = Field(default=30.0, ge=1, le=30)
    vad_threshold: float = Field(default=0.5, gt=0, lt=1)


class StreamCreated(SessionInfo):
    endpoints: Endpoints
    audio_topic: str = Field(description="publish chunk n on <audio_topic>/<n>")
    control_topic: str
