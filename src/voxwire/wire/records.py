"""The records on the bus, one encoding: pydantic models as JSON (topic names:
:mod:`voxwire.wire.topics`).

=========================  =================================  ===========================
topic                      record                             written by
=========================  =================================  ===========================
``transcription.jobs``     :class:`FileJob`                   gateway (an upload)
``transcription.rejobs``   :class:`FileJob` (``version`` > 1)  gateway (a re-transcription)
``transcription.audio``    :class:`StreamStart`               gateway (``POST /v1/streams``)
                           :class:`PromptUpdate`              gateway (``POST .../prompts``)
                           :class:`ClientPublish`             bridge ingest (``audio/<sid>/...``)
``prompt.queries``         :class:`ClientPublish`             bridge ingest (``query/.../request``)
=========================  =================================  ===========================

Sequence numbers. Every message of a session carries a ``seq`` that only grows
(:mod:`voxwire_client.messages`). Two writers share a session's sequence
without talking to each other, so the split is fixed here: the gateway writes
:data:`GATEWAY_SEQ` (the ``queued`` progress, or the error of an upload it
refused) and the worker that transcribes the session starts at
:data:`FIRST_WORKER_SEQ`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from voxwire.core.errors import RecordError
from voxwire_client.api import PromptChange, StreamRequest
from voxwire_client.options import RedactMode, SessionOptions
from voxwire_client.topics import validate_sid

GATEWAY_SEQ = 1
"""The seq of the one message the gateway writes for a session."""
FIRST_WORKER_SEQ = 2
"""The seq of the first message a worker writes for a session."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


class ResolvedOptions(SessionOptions):
    """A session's options once the platform has decided what they left to it
    (:func:`voxwire.sessions.options.resolve`): the language, task and model it is
    transcribed with and the redaction its transcript gets."""

    language: str = "en"
    model: str = Field(description="the model it is transcribed with")
    redact: RedactMode = RedactMode.OFF


class FileJob(ResolvedOptions, _Record):
    """What a worker needs to transcribe one uploaded file: where its audio is, and
    the session's options."""

    sid: str
    tenant_id: str
    audio_key: str = Field(description="blob key of the 16 kHz mono PCM16LE audio")
    track_keys: tuple[str, ...] = Field(
        default=(),
        description="with channels separate: blob keys of each channel's 16 kHz PCM16LE "
        "audio, in channel order (empty: the mono audio is the only track)",
    )
    duration_ms: int = Field(ge=0)
    first_seq: int = Field(
        default=FIRST_WORKER_SEQ, ge=1, description="seq of the job's first message"
    )
    version: int = Field(
        default=1, ge=1, description="the transcript version it makes (2 and up: again)"
    )


class StreamStart(_Record):
    """Open a live stream: only the gateway writes these (clients cannot reach
    the bus except through :class:`ClientPublish`)."""

    kind: Literal["start"] = "start"
    sid: str
    tenant_id: str
    request: StreamRequest

    @field_validator("sid")
    @classmethod
    def _safe_sid(cls, sid: str) -> str:
        return validate_sid(sid)


class PromptUpdate(_Record):
    """Change a live stream's standing prompts, from the HTTP API."""

    kind: Literal["prompts"] = "prompts"
    sid: str
    change: PromptChange


class ClientPublish(_Record):
    """What a client published on one of its ingest topics, as the bridge
    received it: the MQTT topic and the payload's bytes (base64 in the JSON)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    kind: Literal["publish"] = "publish"
    topic: str
    payload: bytes
    response_topic: str | None = None
    """MQTT 5: where the client wants the answer to a request."""
    correlation: bytes | None = None
    """MQTT 5: the correlation data to answer with."""


AudioRecord = Annotated[StreamStart | PromptUpdate | ClientPublish, Field(discriminator="kind")]
"""Any record of ``transcription.audio``."""

_AUDIO = TypeAdapter[AudioRecord](AudioRecord)


def decode_audio_record(data: bytes) -> StreamStart | PromptUpdate | ClientPublish:
    """A record of ``transcription.audio``; raises :class:`RecordError`."""
    try:
        return _AUDIO.validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise RecordError(f"not an audio record: {exc}") from exc


def decode_client_publish(data: bytes) -> ClientPublish:
    """A record of ``prompt.queries``; raises :class:`RecordError`."""
    try:
        return ClientPublish.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise RecordError(f"not a client publish: {exc}") from exc
