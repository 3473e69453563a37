"""Deepgram's listening shapes, as its API reference and its official SDK read
them: the live messages (``Results``, ``UtteranceEnd``, ``SpeechStarted``,
``Metadata``, ``Error``, ``ConfigureFailure``), the pre-recorded response and the
error body. Models only; what fills them is :mod:`.live` and :mod:`.prerecorded`.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict

ARCH = "whisper"
"""What ``model_info.arch`` says: every model voxwire serves is a Whisper."""


def model_uuid(model: str) -> str:
    """A stable id for a served model (Deepgram names its models by uuid too)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"voxwire:model:{model}"))


class _Shape(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorBody(_Shape):
    """Every error of the Deepgram routes (and of a refused WebSocket handshake)."""

    err_code: str
    err_msg: str
    request_id: str


class Word(_Shape):
    word: str
    """Lower case, without punctuation, as Deepgram writes its words."""
    start: float
    end: float
    confidence: float
    punctuated_word: str
    speaker: int | None = None
    """With diarization: 0, 1... (voxwire's S1 is 0)."""


class Alternative(_Shape):
    transcript: str
    confidence: float
    words: list[Word]


class Channel(_Shape):
    alternatives: list[Alternative]


class ModelInfo(_Shape):
    name: str
    version: str
    arch: str = ARCH


class ResultsMetadata(_Shape):
    request_id: str
    model_info: ModelInfo
    model_uuid: str


class Results(_Shape):
    """A live transcript: interim (``is_final`` false) or settled."""

    type: Literal["Results"] = "Results"
    channel_index: list[int]
    duration: float
    start: float
    is_final: bool
    speech_final: bool
    from_finalize: bool = False
    channel: Channel
    metadata: ResultsMetadata


class UtteranceEnd(_Shape):
    type: Literal["UtteranceEnd"] = "UtteranceEnd"
    channel: list[int]
    last_word_end: float


class SpeechStarted(_Shape):
    type: Literal["SpeechStarted"] = "SpeechStarted"
    channel: list[int]
    timestamp: float


class FileMetadata(_Shape):
    """What was heard: a pre-recorded answer's ``metadata``, and (as
    :class:`StreamMetadata`) a live connection's last message."""

    transaction_key: str = "deprecated"
    request_id: str
    sha256: str
    created: str
    duration: float
    channels: int
    models: list[str]
    model_info: dict[str, ModelInfo]


class StreamMetadata(FileMetadata):
    """The last message of a live connection: what was heard."""

    type: Literal["Metadata"] = "Metadata"


class StreamError(_Shape):
    """A live connection's error (a session that failed, a message not understood)."""

    type: Literal["Error"] = "Error"
    variant: str
    description: str
    message: str | None = None


class ConfigureFailure(_Shape):
    type: Literal["ConfigureFailure"] = "ConfigureFailure"
    request_id: str
    code: str
    description: str


LiveMessage = (
    Results | UtteranceEnd | SpeechStarted | StreamMetadata | StreamError | ConfigureFailure
)


# --- pre-recorded ------------------------------------------------------------------------------


class Sentence(_Shape):
    text: str
    start: float
    end: float


class Paragraph(_Shape):
    sentences: list[Sentence]
    num_words: int
    start: float
    end: float
    speaker: int | None = None


class Paragraphs(_Shape):
    transcript: str
    paragraphs: list[Paragraph]


class FileAlternative(_Shape):
    transcript: str
    confidence: float
    words: list[Word]
    paragraphs: Paragraphs | None = None


class FileChannel(_Shape):
    alternatives: list[FileAlternative]
    detected_language: str | None = None


class Utterance(_Shape):
    id: str
    start: float
    end: float
    confidence: float
    channel: int
    transcript: str
    words: list[Word]
    speaker: int | None = None


class FileResults(_Shape):
    channels: list[FileChannel]
    utterances: list[Utterance] | None = None


class FileResponse(_Shape):
    """``POST /v1/listen``'s answer."""

    metadata: FileMetadata
    results: FileResults
