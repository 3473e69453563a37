"""A live Deepgram connection without I/O: what the client sends in, what to do
and what to send back out.

:class:`LiveConnection` takes the client's frames: binary frames are audio
(:meth:`LiveConnection.audio` returns them as the stream's chunks: whole
samples, at most a second each; a WAV header at the start is checked against
the declared format and dropped), text frames are its control messages
(:meth:`LiveConnection.control`: ``KeepAlive``, ``Finalize``, ``CloseStream``;
``Configure`` is answered with a ``ConfigureFailure``, anything else with an
``Error``). It takes the session's voxwire messages in ``seq`` order
(:meth:`LiveConnection.translate`) and returns Deepgram's:

- a ``partial`` is an interim ``Results`` (``is_final`` false), when
  ``interim_results`` is on;
- a ``final`` is a ``Results`` with ``is_final`` true and ``speech_final`` true:
  voxwire commits a segment when a pause ends the utterance, so each final ends
  a turn, except one cut at ``max_segment_s`` while the speaker went on (and none
  with ``endpointing=false``); with ``utterance_end_ms``, an ``UtteranceEnd``
  follows it;
- a ``final`` the client's ``Finalize`` asked for (``flushed``: the gateway sent
  the stream's ``{"type": "flush"}``) has ``from_finalize`` true and
  ``speech_final`` false: no pause ended the turn;
- the VAD's start of speech is a ``SpeechStarted``, with ``vad_events``;
- a fatal error is an ``Error`` (the connection then closes).

:meth:`LiveConnection.metadata` is the ``Metadata`` the connection ends with:
the session id as ``request_id``, the audio's duration and sha256.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from voxwire.gateway.deepgram_api.params import Listening, RawAudio
from voxwire.gateway.deepgram_api.shapes import (
    Alternative,
    Channel,
    ConfigureFailure,
    LiveMessage,
    ModelInfo,
    Results,
    ResultsMetadata,
    SpeechStarted,
    StreamError,
    StreamMetadata,
    UtteranceEnd,
    Word,
    model_uuid,
)
from voxwire_client.encodings import SAMPLE_BYTES, AudioEncoding
from voxwire_client.messages import (
    ErrorMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    WordData,
)

CHANNEL_INDEX = [0, 1]
"""``channel_index``: channel 0 of 1, as Deepgram writes it for a mono stream."""

MODEL_VERSION = "voxwire"

WAV_FORMATS = {1: AudioEncoding.PCM16, 6: AudioEncoding.ALAW, 7: AudioEncoding.MULAW}
"""A WAV header's format tag: PCM, A-law, mu-law."""

Control = Literal["keepalive", "finalize", "close"]


class LiveAudioError(ValueError):
    """Audio the connection cannot take (a WAV header of another format); the
    connection closes with Deepgram's ``DATA-0000`` and this reason."""


@dataclass(slots=True)
class LiveConnection:
    """One live connection's state; see the module docstring."""

    sid: str
    raw: RawAudio
    listening: Listening
    model: str
    """The model transcribing it (the served name)."""
    max_segment_ms: int = 30_000
    chunks: int = 0
    """Chunks handed out so far (the next one's number)."""
    audio_bytes: int = 0
    _sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    _pending: bytes = b""
    _started: bool = False
    _speech: bool = False
    _created: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    @property
    def frame_bytes(self) -> int:
        return SAMPLE_BYTES[self.raw.encoding] * self.raw.channels

    def audio(self, frame: bytes) -> list[tuple[int, bytes]]:
        """The stream's next chunks ``(number, bytes)`` from a binary frame;
        LiveAudioError for a WAV header of another format than declared."""
        if not self._started:
            self._started = True
            frame = self._without_wav_header(frame)
        self._sha256.update(frame)
        self.audio_bytes += len(frame)
        data = self._pending + frame
        usable = len(data) - len(data) % self.frame_bytes
        self._pending = data[usable:]
        second = self.raw.sample_rate * self.frame_bytes
        out = []
        for at in range(0, usable, second):
            out.append((self.chunks, data[at : min(at + second, usable)]))
            self.chunks += 1
        return out

    def control(self, text: str) -> tuple[Control | None, list[LiveMessage]]:
        """What a text frame asks, and what to answer it with at once."""
        try:
            kind = json.loads(text).get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind == "KeepAlive":
            return "keepalive", []
        if kind == "Finalize":
            return "finalize", []
        if kind == "CloseStream":
            return "close", []
        if kind == "Configure":
            failure = ConfigureFailure(
                request_id=self.sid,
                code="CONFIGURE_KEYTERMS_NOT_SUPPORTED",
                description="keyterms and features are fixed when the connection opens here",
            )
            return "keepalive", [failure]
        error = StreamError(
            variant="SchemaError",
            description="a text message must be KeepAlive, Finalize, CloseStream or Configure",
            message=text[:200],
        )
        return None, [error]

    def translate(self, message: Message) -> list[LiveMessage]:
        """The Deepgram messages a voxwire message of the session becomes."""
        if isinstance(message, SegmentMessage):
            if message.type == "partial":
                interim = self.listening.interim_results and message.segment.text.strip()
                return [self._results(message.segment, final=False)] if interim else []
            return self._final(message.segment)
        if isinstance(message, ProgressMessage) and message.speech is not None:
            started = message.speech and not self._speech
            self._speech = message.speech
            if started and self.listening.vad_events:
                stamp = round(message.processed_ms / 1000, 3)
                return [SpeechStarted(channel=CHANNEL_INDEX, timestamp=stamp)]
        if isinstance(message, ErrorMessage) and message.fatal:
            return [StreamError(variant="SessionError", description=message.message)]
        return []

    def metadata(self) -> StreamMetadata:
        """The connection's last message."""
        seconds = self.audio_bytes / self.frame_bytes / self.raw.sample_rate
        info = self._model_info()
        return StreamMetadata(
            request_id=self.sid,
            sha256=self._sha256.hexdigest(),
            created=self._created,
            duration=round(seconds, 3),
            channels=self.raw.channels,
            models=[model_uuid(self.model)],
            model_info={model_uuid(self.model): info},
        )

    def _final(self, segment: SegmentData) -> list[LiveMessage]:
        if segment.model:
            self.model = segment.model
        if not segment.text.strip():
            return []
        cut = segment.end_ms - segment.start_ms >= self.max_segment_ms - 50
        speech_final = self.listening.speech_final and not cut and not segment.flushed
        results = self._results(segment, final=True, speech_final=speech_final)
        if segment.flushed:
            results = results.model_copy(update={"from_finalize": True})
        out: list[LiveMessage] = [results]
        if speech_final and self.listening.utterance_end:
            last = segment.words[-1].end_ms if segment.words else segment.end_ms
            out.append(UtteranceEnd(channel=CHANNEL_INDEX, last_word_end=round(last / 1000, 3)))
        return out

    def _results(self, segment: SegmentData, *, final: bool, speech_final: bool = False) -> Results:
        words = [deepgram_word(w, segment.speaker) for w in segment.words if w.word.strip()]
        transcript = segment.text.strip()
        alternative = Alternative(
            transcript=transcript if self.listening.punctuate else plain(transcript),
            confidence=confidence(segment.words),
            words=words,
        )
        return Results(
            channel_index=CHANNEL_INDEX,
            duration=round((segment.end_ms - segment.start_ms) / 1000, 3),
            start=round(segment.start_ms / 1000, 3),
            is_final=final,
            speech_final=speech_final,
            channel=Channel(alternatives=[alternative]),
            metadata=ResultsMetadata(
                request_id=self.sid,
                model_info=self._model_info(),
                model_uuid=model_uuid(self.model),
            ),
        )

    def _model_info(self) -> ModelInfo:
        return ModelInfo(name=self.model, version=MODEL_VERSION)

    def _without_wav_header(self, frame: bytes) -> bytes:
        """``frame`` less a WAV header at its start, which must agree with the declared format."""
        header = wav_format(frame)
        if header is None:
            return frame
        declared = (self.raw.encoding, self.raw.sample_rate, self.raw.channels)
        found, data_at = header[:3], header[3]
        if found != declared:
            raise LiveAudioError(
                f"the audio is {found[0].value} at {found[1]} Hz, {found[2]} channel(s), but the "
                f"connection declared {declared[0].value} at {declared[1]} Hz, {declared[2]} "
                "channel(s): open it with the encoding, sample_rate and channels of the audio"
            )
        return frame[data_at:]


def wav_format(frame: bytes) -> tuple[AudioEncoding, int, int, int] | None:
    """The encoding, rate and channels of a WAV header at the start of ``frame``,
    and where its samples start; None when ``frame`` does not start with one
    (LiveAudioError for a WAV of a format a stream cannot take)."""
    if len(frame) < 12 or frame[:4] != b"RIFF" or frame[8:12] != b"WAVE":
        return None
    at, fmt = 12, None
    while at + 8 <= len(frame):
        name, size = frame[at : at + 4], struct.unpack_from("<I", frame, at + 4)[0]
        if name == b"fmt " and at + 24 <= len(frame):
            tag, channels, rate = struct.unpack_from("<HHI", frame, at + 8)
            bits = struct.unpack_from("<H", frame, at + 22)[0]
            fmt = (tag, channels, rate, bits)
        elif name == b"data" and fmt is not None:
            tag, channels, rate, bits = fmt
            encoding = WAV_FORMATS.get(tag)
            if encoding is None or bits != 8 * SAMPLE_BYTES[encoding]:
                raise LiveAudioError(
                    f"a WAV of format {tag} with {bits}-bit samples cannot be streamed: "
                    "send 16-bit PCM, mu-law or A-law"
                )
            return encoding, rate, channels, at + 8
        at += 8 + size + size % 2
    return None


def plain(text: str) -> str:
    """``text`` as Deepgram writes it without ``punctuate``: lower case, no punctuation."""
    words = (plain_word(w) for w in text.split())
    return " ".join(w for w in words if w)


def plain_word(word: str) -> str:
    return re.sub(r"[^\w'-]", "", word.lower()).strip("'-")


def deepgram_word(word: WordData, speaker: str | None) -> Word:
    written = word.word.strip()
    return Word(
        word=plain_word(written) or written.lower(),
        start=round(word.start_ms / 1000, 3),
        end=round(word.end_ms / 1000, 3),
        confidence=round(word.probability, 4),
        punctuated_word=written,
        speaker=speaker_number(speaker),
    )


def speaker_number(label: str | None) -> int | None:
    """Deepgram's speaker number for a diarization label (``S1``: 0); None for none."""
    if label is None or not re.fullmatch(r"S[1-9][0-9]*", label):
        return None
    return int(label[1:]) - 1


def confidence(words: tuple[WordData, ...]) -> float:
    """The mean of the words' probabilities (0.0 without words: interim results)."""
    return round(sum(w.probability for w in words) / len(words), 4) if words else 0.0
