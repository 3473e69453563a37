"""A session's stored audio, what playback sends and re-transcription reads; in a
redacted session with the redacted spans silenced, and as recorded only where
the session asked to keep it.

A session's audio blobs (:mod:`voxwire.blobs`):

=====================  ==================================================================
``audio.pcm``          16 kHz mono PCM16LE, what engines and playback read: in a redacted
                       session, with the redacted spans silenced, once its transcript
                       is done (never before: until then a redacted upload waits as
                       ``incoming.pcm``, a live stream as its parts)
``original.<ext>``     the file as uploaded: sessions without redaction only
``unredacted.<ext>``   a redacted session's audio as recorded, with
                       ``keep_original_audio``: the file as uploaded, or a live
                       stream's PCM (``unredacted.pcm``)
``redaction.json``     :class:`AudioRedaction`: the spans silenced (the marker that
                       ``audio.pcm`` is redacted)
``track<n>.pcm``       an upload with separate channels: channel n (1, 2...) alone, 16
                       kHz mono PCM16LE (``audio.pcm`` is their mix); in a redacted
                       session ``incoming.track<n>.pcm``, kept only until its
                       transcript is done
=====================  ==================================================================

The spans are the times of the redacted words of the final transcript
(:func:`voxwire.text.redacted_times.redacted_spans`), widened by
:data:`~voxwire.audio.silencing.REDACTION_PAD_MS` on each side since word times
are approximate, and set to zero samples. A re-transcription reads the
redacted ``audio.pcm`` and silences what its own transcript redacts on top.
"""

from __future__ import annotations

import io
import mimetypes
import wave
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from voxwire.audio.samples import SAMPLE_RATE
from voxwire.audio.silencing import REDACTION_PAD_MS, duration_ms, padded, silence
from voxwire.blobs import BlobStore
from voxwire.core.errors import NotFoundError
from voxwire.text.redacted_times import redacted_spans
from voxwire_client.messages import SegmentData

AUDIO_BLOB = "audio.pcm"
"""The session's audio as the engines take it (16 kHz mono PCM16LE): uploads
and archived live streams alike."""
INCOMING_BLOB = "incoming.pcm"
"""A redacted upload's decoded audio until its transcript is done."""
UNREDACTED = "unredacted."
"""The name's start of a redacted session's audio as recorded (``keep_original_audio``)."""
ORIGINAL = "original."
"""The name's start of an upload as it came (sessions without redaction)."""
REDACTION_BLOB = "redaction.json"
TRACK = "track"
"""The name's start of a channel's own audio (``track1.pcm``, ``track2.pcm``...)."""


def track_blob(channel: int, *, incoming: bool = False) -> str:
    """The blob name of channel ``channel``'s audio (1, 2...): ``incoming.`` before
    it in a redacted session, until its transcript is done."""
    return f"{'incoming.' if incoming else ''}{TRACK}{channel}.pcm"


def pcm_to_wav(pcm: bytes) -> bytes:
    """16 kHz mono PCM16LE as a WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm)
    return out.getvalue()


class AudioRedaction(BaseModel):
    """What was silenced in a session's ``audio.pcm``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    words_ms: tuple[tuple[int, int], ...]
    """Milliseconds ``[start, end)`` of the redacted words (of every version so far)."""
    spans_ms: tuple[tuple[int, int], ...]
    """Milliseconds ``[start, end)`` set to silence: the words, padded and merged."""
    pad_ms: int
    """The padding each redacted word got on each side."""
    version: int
    """The transcript version whose redactions were silenced last."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """A redacted session's transcript, as its audio is redacted by."""

    finals: Sequence[SegmentData]
    version: int = 1
    keep_original: bool = False
    """Keep the audio as recorded too (``unredacted.pcm``): a live stream's
    ``keep_original_audio`` (an upload's original is kept as it came, by the gateway)."""


def read_redaction(blobs: BlobStore, sid: str) -> AudioRedaction | None:
    """What was silenced in the session's audio; None: its audio is not redacted."""
    try:
        return AudioRedaction.model_validate_json(blobs.get(blobs.key(sid, REDACTION_BLOB)))
    except NotFoundError:
        return None


def store_redacted(blobs: BlobStore, sid: str, pcm: bytes, redaction: Redaction) -> AudioRedaction:
    """Store ``pcm`` (the session's audio, as read for the transcript) as
    ``audio.pcm`` with the redacted spans of ``redaction`` silenced, together
    with those silenced before (a re-transcription's); blocking I/O."""
    before = read_redaction(blobs, sid)
    if redaction.keep_original:
        blobs.put(blobs.key(sid, f"{UNREDACTED}pcm"), pcm)
    words = sorted({*(before.words_ms if before else ()), *redacted_spans(redaction.finals)})
    done = AudioRedaction(
        words_ms=tuple(words),
        spans_ms=padded(words, REDACTION_PAD_MS, duration_ms(pcm)),
        pad_ms=REDACTION_PAD_MS,
        version=redaction.version,
    )
    blobs.put(blobs.key(sid, AUDIO_BLOB), silence(pcm, done.spans_ms))
    blobs.put(blobs.key(sid, REDACTION_BLOB), done.model_dump_json().encode())
    return done


@dataclass(frozen=True, slots=True)
class StoredAudio:
    """Audio to send: its bytes and media type."""

    data: bytes
    media_type: str


def served_audio(blobs: BlobStore, sid: str) -> StoredAudio:
    """What ``GET /v1/sessions/{sid}/audio`` sends: the upload as it came, else
    ``audio.pcm`` as WAV (redacted, in a redacted session); NotFoundError when
    neither is stored (yet); blocking I/O."""
    key = blobs.find(sid, ORIGINAL)
    if key is not None:
        return _as_stored(blobs, key)
    return StoredAudio(pcm_to_wav(_audio_pcm(blobs, sid)), "audio/wav")


def original_audio(blobs: BlobStore, sid: str) -> StoredAudio:
    """The session's audio as recorded: a redacted session's kept original
    (NotFoundError when it kept none), else what :func:`served_audio` sends."""
    key = blobs.find(sid, UNREDACTED)
    if key is not None:
        return _as_stored(blobs, key)
    if read_redaction(blobs, sid) is not None:
        raise NotFoundError(
            "this session's audio was redacted and its original was not kept",
            hint="open a redacted session with keep_original_audio to keep it",
            sid=sid,
        )
    return served_audio(blobs, sid)


def _as_stored(blobs: BlobStore, key: str) -> StoredAudio:
    data = blobs.get(key)
    if key.endswith(".pcm"):
        return StoredAudio(pcm_to_wav(data), "audio/wav")
    return StoredAudio(data, mimetypes.guess_type(key)[0] or "application/octet-stream")


def _audio_pcm(blobs: BlobStore, sid: str) -> bytes:
    try:
        return blobs.get(blobs.key(sid, AUDIO_BLOB))
    except NotFoundError:
        raise NotFoundError(
            "no audio stored for this session",
            hint="a live stream's audio is stored once the stream has ended; a redacted "
            "session's once its transcript is done",
            sid=sid,
        ) from None
