"""OpenAI's audio transcription shapes, and a voxwire transcript in each of them.

Pure code, no I/O: a :class:`~voxwire_client.api.TranscriptResponse` in, the
body of ``response_format`` out (:func:`rendered`). ``verbose_json`` carries
what voxwire knows of each segment: times, text, ``avg_logprob`` (the mean log
of its words' probabilities) and ``compression_ratio`` (as Whisper computes it,
over the segment's text); ``seek`` is the segment's start in 10 ms frames, and
``tokens`` (not kept), ``temperature`` and ``no_speech_prob`` are fixed values.
"""

from __future__ import annotations

import math
import zlib
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from voxwire.text.exports import CONTENT_TYPES, render
from voxwire_client.api import TranscriptFormat, TranscriptResponse
from voxwire_client.messages import SegmentData


class ResponseFormat(StrEnum):
    JSON = "json"
    TEXT = "text"
    SRT = "srt"
    VERBOSE_JSON = "verbose_json"
    VTT = "vtt"


class Granularity(StrEnum):
    """What ``verbose_json`` times: its ``segments`` (the default), its ``words``, or both."""

    WORD = "word"
    SEGMENT = "segment"


class _Shape(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorDetail(_Shape):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(_Shape):
    """Every error of the OpenAI routes."""

    error: ErrorDetail


class Usage(_Shape):
    type: Literal["duration"] = "duration"
    seconds: float


class Transcription(_Shape):
    """``response_format=json``."""

    text: str
    usage: Usage | None = None


class Word(_Shape):
    word: str
    start: float
    end: float


class Segment(_Shape):
    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float


class VerboseTranscription(_Shape):
    """``response_format=verbose_json``: ``segments`` and ``words`` as the
    granularities ask (``segments`` alone by default)."""

    task: str
    language: str
    duration: float
    text: str
    segments: list[Segment] | None = None
    words: list[Word] | None = None
    usage: Usage | None = None


class TextDelta(_Shape):
    """A stream's event: more text (a final segment's, with a space before all but the first)."""

    type: Literal["transcript.text.delta"] = "transcript.text.delta"
    delta: str


class TextDone(_Shape):
    """A stream's last event: the whole text."""

    type: Literal["transcript.text.done"] = "transcript.text.done"
    text: str


class ModelCard(_Shape):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(_Shape):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def seconds(ms: int) -> float:
    return round(ms / 1000, 3)


def compression_ratio(text: str) -> float:
    """Whisper's measure of repetition: the text's bytes over their zlib-compressed size."""
    data = text.encode()
    return round(len(data) / len(zlib.compress(data)), 4) if data else 0.0


def avg_logprob(segment: SegmentData) -> float:
    """The mean natural log of the segment's word probabilities (0.0 without words)."""
    if not segment.words:
        return 0.0
    logs = [math.log(max(w.probability, 1e-6)) for w in segment.words]
    return round(sum(logs) / len(logs), 4)


def verbose(
    transcript: TranscriptResponse, granularities: frozenset[Granularity], temperature: float
) -> VerboseTranscription:
    kept = [s for s in transcript.segments if s.text.strip()]
    segments = [
        Segment(
            id=n,
            seek=s.start_ms // 10,
            start=seconds(s.start_ms),
            end=seconds(s.end_ms),
            text=s.text,
            tokens=[],
            temperature=temperature,
            avg_logprob=avg_logprob(s),
            compression_ratio=compression_ratio(s.text),
            no_speech_prob=0.0,
        )
        for n, s in enumerate(kept)
    ]
    words = [
        Word(word=w.word.strip(), start=seconds(w.start_ms), end=seconds(w.end_ms))
        for s in kept
        for w in s.words
        if w.word.strip()
    ]
    return VerboseTranscription(
        task=str(transcript.task),
        language=transcript.language or "",
        duration=seconds(transcript.duration_ms),
        text=transcript.text,
        segments=segments if Granularity.SEGMENT in granularities or not granularities else None,
        words=words if Granularity.WORD in granularities else None,
        usage=Usage(seconds=seconds(transcript.duration_ms)),
    )


_SUBTITLES = {ResponseFormat.SRT: TranscriptFormat.SRT, ResponseFormat.VTT: TranscriptFormat.VTT}


def rendered(
    transcript: TranscriptResponse,
    fmt: ResponseFormat,
    granularities: frozenset[Granularity] = frozenset(),
    temperature: float = 0.0,
) -> Transcription | VerboseTranscription | tuple[str, str]:
    """The body of ``fmt``: a model for the JSON formats, else (text, content type)."""
    if fmt is ResponseFormat.JSON:
        return Transcription(
            text=transcript.text, usage=Usage(seconds=seconds(transcript.duration_ms))
        )
    if fmt is ResponseFormat.VERBOSE_JSON:
        return verbose(transcript, granularities, temperature)
    if fmt is ResponseFormat.TEXT:
        return f"{transcript.text}\n", CONTENT_TYPES[TranscriptFormat.TXT]
    subtitles = _SUBTITLES[fmt]
    return render(list(transcript.segments), subtitles), CONTENT_TYPES[subtitles]
