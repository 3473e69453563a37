"""The voxwire exception tree.

Every error raised by voxwire code derives from :class:`VoxwireError`. Library
errors (PyAV, whisper.cpp, paho, SQLite, ...) are translated where they enter
and carry the session id when there is one. Each class lives in this module
unless the drawing names another one::

    VoxwireError
    ├── ConfigError              bad or missing configuration
    ├── ModelError               a model file is missing, corrupt or cannot load
    │   ├── ModelConversionError the CTranslate2 -> ggml conversion failed
    │   └── HubUnavailableError  the Hub cannot serve a model now (voxwire.models.hub)
    ├── AudioError               the audio cannot be used (reaches the client)
    │   ├── EmptyAudioError
    │   ├── UnsupportedAudioError  not audio, or a format we cannot decode
    │   ├── TruncatedAudioError
    │   ├── AudioTooLongError
    │   ├── InvalidChunkError    a bad stream chunk (voxwire.workers.stream.worker)
    │   ├── BadFrameError        a live chunk that did not decode (voxwire.audio.codecs)
    │   ├── ChunkOrderError      a chunk too far ahead or missing (voxwire.workers.stream.intake)
    │   └── StreamClosedError    audio after the stream ended (voxwire.workers.stream.intake)
    ├── TooManyStreamsError      a worker is full (voxwire.workers.stream.worker)
    ├── EngineError              transcription failed inside an engine
    │   └── TranscriptionAborted the engine was asked to stop (voxwire.workers.engine)
    ├── AuthError                missing or invalid credentials
    │   └── TokenError           a foreign, tampered or expired token (voxwire.access.tokens)
    ├── ForbiddenError           valid credentials that may not do this (a device key)
    ├── RateLimitedError         too many requests from one caller (voxwire.core.ratelimit)
    ├── QuotaExceededError       a session over a tenant's quota (voxwire.access.quotas)
    ├── InvalidRequestError      a request that is malformed or breaks a limit
    │   └── CallbackRefusedError an address not allowed (voxwire.sessions.webhook_addresses)
    ├── PayloadTooLargeError     an upload over the size limit
    ├── NotFoundError            a session, key or model that does not exist
    ├── ConflictError            a request the session's state does not allow now
    ├── NoWorkerError            no worker runs the session's model now (voxwire.sessions.pools)
    ├── StoreError               the session store failed: unreachable, a query, a migration
    ├── BlobError                the blob store failed (voxwire.blobs)
    ├── SearchIndexError         the search index failed (voxwire.search)
    ├── SearchQueryError         a query with nothing to search (voxwire.search.query)
    ├── BusError                 the job bus failed (Kafka, in-process)
    │   └── RecordError          a bus record that is not what its topic carries
    ├── CheckpointError          stream checkpoints failed (voxwire.workers.stream.checkpoints)
    ├── NotReadyError            a part of a process is not ready yet (voxwire.core.readiness)
    └── MqttError                the MQTT broker or connection failed (carries the topic)

Session ids are checked by :mod:`voxwire_client.topics`, which raises
``voxwire_client.InvalidSessionIdError`` (a ValueError) for unsafe ones.

Each error has a stable ``code`` (sent to clients in error messages) and an
optional ``hint`` telling the user what to do next.
"""

from __future__ import annotations


class VoxwireError(Exception):
    """Base of every voxwire error."""

    code = "internal"

    def __init__(self, message: str, *, hint: str | None = None, sid: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.sid = sid

    def __str__(self) -> str:
        text = self.message
        if self.sid:
            text = f"[{self.sid}] {text}"
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class ConfigError(VoxwireError):
    code = "config"


class ModelError(VoxwireError):
    code = "model"


class ModelConversionError(ModelError):
    code = "model_conversion"


class AudioError(VoxwireError):
    code = "audio"


class EmptyAudioError(AudioError):
    code = "audio_empty"


class UnsupportedAudioError(AudioError):
    code = "audio_unsupported"


class TruncatedAudioError(AudioError):
    code = "audio_truncated"


class AudioTooLongError(AudioError):
    code = "audio_too_long"


class EngineError(VoxwireError):
    code = "engine"


class AuthError(VoxwireError):
    code = "unauthorized"


class ForbiddenError(VoxwireError):
    """Valid credentials asking for something they may not do (a device key searching)."""

    code = "forbidden"


class InvalidRequestError(VoxwireError):
    """A request that is malformed or asks for more than a limit allows."""

    code = "invalid_request"


class PayloadTooLargeError(VoxwireError):
    """An upload larger than the gateway accepts."""

    code = "payload_too_large"


class NotFoundError(VoxwireError):
    code = "not_found"


class ConflictError(VoxwireError):
    """A request the session's state does not allow (e.g. changing an ended stream)."""

    code = "conflict"


class StoreError(VoxwireError):
    """The session store failed: unreachable, a query error, a bad migration."""

    code = "store"


class BusError(VoxwireError):
    code = "bus"


class RecordError(BusError):
    """A bus record that is not what its topic carries (a bug, or a foreign writer)."""

    code = "bus_record"


class MqttError(VoxwireError):
    """An MQTT connection, publish or broker failure; ``topic`` names the topic involved."""

    code = "mqtt"

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        hint: str | None = None,
        sid: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint, sid=sid)
        self.topic = topic

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} [topic {self.topic}]" if self.topic else text
