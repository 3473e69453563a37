"""Wire messages published on the session topics (pydantic v2 models).

Every payload is JSON with a common envelope:

- ``v``: contract version (1)
- ``sid``: the session id
- ``seq``: per-session, strictly increasing across all topics of the session;
  a redelivery carries the same ``seq``
- ``ts``: server time (UTC) when the message was produced
- ``type``: which message this is
- ``version``: the transcript version (1; each re-transcription publishes the
  next one, with ``seq`` going on after the session's last)

``seq`` lets a subscriber drop QoS 1 duplicates and notice gaps; the gateway's
history API returns every message of a session by ``seq``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from voxwire_client.topics import TopicKind

CONTRACT_VERSION = 1


class SessionStatus(StrEnum):
    QUEUED = "queued"
    TRANSCRIBING = "transcribing"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (SessionStatus.COMPLETED, SessionStatus.FAILED)


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Envelope(_Model):
    v: Literal[1] = 1
    sid: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    seq: int = Field(ge=1)
    ts: datetime = Field(default_factory=utcnow)
    version: int = Field(
        default=1,
        ge=1,
        description="the transcript version the message belongs to: 1 for the first "
        "transcription, 2 and up for each re-transcription of the session's audio",
    )
    type: str
    """Which message this is: each message narrows it to its own literal (declared
    here so that it comes before a message's own fields on the wire)."""


class Task(StrEnum):
    """What a session's text is: ``transcribe``, the words in the language spoken;
    ``translate``, their English translation (Whisper's translate task; needs a
    multilingual model; without a language given, the one spoken is detected).
    Segments of either say the language spoken."""

    TRANSCRIBE = "transcribe"
    TRANSLATE = "translate"


TaskField = Annotated[
    Task,
    Field(description="transcribe: the text in the language spoken; translate: in English"),
]
"""A session's :class:`Task` as requests and messages carry it."""


class WordData(_Model):
    """One word of a final segment: its times (ms from the audio start, inside
    the segment's) and how sure the engine was of it (0 to 1)."""

    word: str
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    probability: float = Field(ge=0, le=1)


class SegmentData(_Model):
    """One segment of transcript; times in milliseconds from the audio start.
    ``words`` (finals only, empty where the engine gave no word times) are the
    segment's words in order; a redacted span's words are masked as its text is."""

    id: str
    index: int = Field(ge=0)
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    text: str
    language: str | None = None
    language_prob: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="how sure the language detection was; null when the language was given",
    )
    speaker: str | None = Field(
        default=None,
        description="with diarization: S1, S2... in order of first appearance; with "
        "separate channels: the channel's label; a final's "
        "speaker is never changed afterwards (no relabelling message exists)",
    )
    channel: int | None = Field(
        default=None,
        ge=1,
        description="with channels separate: the audio channel it was said on (1, 2...); "
        "its speaker is that channel's label",
    )
    model: str | None = Field(default=None, description="the model that transcribed it")
    task: TaskField = Task.TRANSCRIBE
    words: tuple[WordData, ...] = Field(
        default=(), description="word times and confidence, in order (finals only)"
    )
    continues: bool = Field(
        default=False,
        description="a live final that goes on with the utterance of the final before it: "
        "that one was decided early (endpointing policy fast) and the speaker went on "
        "within the silence that ends an utterance; show it on the same line",
    )
    flushed: bool = Field(
        default=False,
        description='a live final the client asked for ({"type": "flush"} on the control '
        "topic) before a pause ended the utterance",
    )


class ProgressMessage(Envelope):
    """Session status and how much of the audio has been processed.

    Live streams also say whether the speaker is talking (``speech``, per the
    VAD), how far transcription is behind real time (``lag_ms``), and how many
    partials were skipped so far (``partials_skipped``): under load, partials
    wait for the finals and are replaced by newer ones, so they thin out; the
    count stops growing once the load drops.
    """

    type: Literal["progress"] = "progress"
    status: SessionStatus
    percent: float = Field(ge=0, le=100)
    processed_ms: int = Field(ge=0, default=0)
    duration_ms: int = Field(ge=0, default=0)
    speech: bool | None = None
    lag_ms: int | None = Field(default=None, ge=0)
    partials_skipped: int | None = Field(default=None, ge=0)


class LatencyData(_Model):
    """Where the time went from the end of a segment's audio to its message, in ms;
    the message's ``ts`` is when it was published."""

    vad_ms: int = Field(ge=0, description="last audio arrived -> the endpointer decided")
    queue_ms: int = Field(ge=0, description="decided -> the engine started")
    transcribe_ms: int = Field(ge=0, description="the engine's time")


class SegmentMessage(Envelope):
    """A ``final`` (committed, never revised) or ``partial`` (revisable) segment."""

    type: Literal["final", "partial"]
    segment: SegmentData
    latency: LatencyData | None = None


class TranscriptMessage(Envelope):
    """The complete transcript, published once at the end of a session."""

    type: Literal["transcript"] = "transcript"
    text: str
    language: str | None = None
    language_prob: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="how sure the language detection was; null when the language was given",
    )
    duration_ms: int = Field(ge=0)
    segments: tuple[SegmentData, ...]
    model: str | None = Field(default=None, description="the model that transcribed it")
    task: TaskField = Task.TRANSCRIBE


class MatchData(_Model):
    """A prompt heard in the transcript: where, how sure, and the text around it.
    Published as a :class:`MatchMessage` when heard; a transcript lists them."""

    prompt_id: str
    prompt: str
    """The prompt's text as the user gave it."""
    score: float = Field(ge=0, le=1)
    """1.0 for an exact match, else the fuzzy score, at least the prompt's threshold."""
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    """The times of the matched words when the finals carry word times, else
    estimated from their characters' position within the finals."""
    text: str
    """The matched words as they appear in the transcript."""
    highlight: str
    """The finals' text, HTML-escaped, with the match wrapped in ``<em>...</em>``."""
    segment_ids: tuple[str, ...]
    """The finals the matched words are in."""
    speaker: str | None = Field(
        default=None,
        description="with diarization: who said the matched words (when one speaker said them)",
    )


class MatchMessage(MatchData, Envelope):
    """A prompt was heard: where, how sure, and the text around it."""

    # on the wire: the envelope's fields (``type`` this literal), then MatchData's
    type: Literal["match"] = "match"

    def data(self) -> MatchData:
        """The match without its envelope: what a transcript lists and a store keeps."""
        return MatchData(**self.model_dump(include=set(MatchData.model_fields)))


class ErrorMessage(Envelope):
    """Something went wrong with the session; ``fatal`` ends it."""

    type: Literal["error"] = "error"
    code: str
    message: str
    hint: str | None = None
    fatal: bool = True


Message = Annotated[
    ProgressMessage | SegmentMessage | TranscriptMessage | MatchMessage | ErrorMessage,
    Field(discriminator="type"),
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def parse_message(payload: bytes | str) -> Message:
    """Parse one JSON payload; raises pydantic.ValidationError when invalid."""
    return MESSAGE_ADAPTER.validate_json(payload)


def encode_message(message: Message) -> bytes:
    return message.model_dump_json().encode()


def topic_kind(message: Message) -> TopicKind:
    """Which session topic a message is published on."""
    if isinstance(message, (ProgressMessage, ErrorMessage)):
        return TopicKind.PROGRESS
    if isinstance(message, MatchMessage):
        return TopicKind.MATCH
    return TopicKind.RESULT


def is_terminal(message: Message) -> bool:
    """True for the last message a session publishes."""
    if isinstance(message, ErrorMessage):
        return message.fatal
    return isinstance(message, ProgressMessage) and message.status.terminal
