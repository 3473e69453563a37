"""A telephony media stream (Twilio Media Streams' protocol), without I/O.

A telephony platform opens a WebSocket to us for a call and sends JSON text
messages, in order: ``connected``; ``start`` (the account, call and stream ids,
the tracks, the custom parameters of the TwiML ``<Stream>``, the media format:
``audio/x-mulaw`` at 8000 Hz, mono); ``media`` (base64 G.711 mu-law, 20 ms a
message, with its ``track``, ``chunk`` number and ``timestamp``) for as long as
the call lasts; ``mark`` and ``dtmf`` now and then; ``stop`` at the end.

:class:`MediaStreamCall` reads them one by one and returns what to do
(:data:`Action`): :class:`OpenStream` once ``start`` has come (the session id is
derived from the call id, ``call-<CallSid>``, so the caller's application knows
it without asking), then :class:`Audio` with the next chunk's bytes, then
:class:`EndStream`. The owner performs them.

Tracks. When ``start`` lists both ``inbound`` and ``outbound`` (TwiML
``<Stream track="both_tracks">``), the call becomes a stream with separate
channels: channel 1 the inbound track (the caller, labelled ``customer``),
channel 2 the outbound one (``agent``), interleaved by
:class:`~voxwire.gateway.media_tracks.TrackInterleaver`; the custom parameters
``inbound_label`` and ``outbound_label`` rename them. With one track (or a
``track`` chosen by the owner), that track alone is heard, mono, as before.

:meth:`MediaStreamCall.detach` (the connection dropped without ``stop``)
returns the audio still held, without ending the stream: the owner may let a
reconnection of the same call go on with it (:meth:`MediaStreamCall.go_on_from`
numbers its chunks after those sent) before it ends it.

Every refusal is a :class:`MediaStreamError` with the reason, for the close
frame: a message that is not JSON or not one of the protocol's, ``media``
before ``start``, a media format other than mu-law 8 kHz mono, a payload that
is not base64.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from voxwire.gateway.media_tracks import TrackInterleaver
from voxwire_client.api import StreamRequest
from voxwire_client.encodings import AudioEncoding
from voxwire_client.options import ChannelMode, validate_speaker
from voxwire_client.topics import validate_sid


class MediaStreamError(ValueError):
    """A message the media stream cannot take; the connection is closed with it."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class MediaFormat(_Event):
    encoding: str
    sample_rate: int = Field(alias="sampleRate")
    channels: int = 1


class StartData(_Event):
    account_sid: str = Field(default="", alias="accountSid")
    call_sid: str = Field(alias="callSid", pattern=r"^[A-Za-z0-9_-]{1,58}$")
    stream_sid: str = Field(alias="streamSid")
    tracks: tuple[str, ...] = ("inbound",)
    custom_parameters: dict[str, str] = Field(default_factory=dict, alias="customParameters")
    media_format: MediaFormat = Field(alias="mediaFormat")


class MediaData(_Event):
    track: str = "inbound"
    chunk: int | None = None
    timestamp: int | None = None
    payload: str


class Connected(_Event):
    event: Literal["connected"]


class Start(_Event):
    event: Literal["start"]
    start: StartData


class Media(_Event):
    event: Literal["media"]
    media: MediaData


class Other(_Event):
    """``mark``, ``dtmf``: nothing to do with the audio."""

    event: Literal["mark", "dtmf"]


class Stop(_Event):
    event: Literal["stop"]


_EVENT: TypeAdapter[Connected | Start | Media | Other | Stop] = TypeAdapter(
    Annotated[Connected | Start | Media | Other | Stop, Field(discriminator="event")]
)


@dataclass(frozen=True, slots=True)
class OpenStream:
    sid: str
    request: StreamRequest
    call_sid: str
    stream_sid: str
    key: str | None = field(default=None, repr=False)
    """The API key in the stream's custom parameters (``<Parameter name="key">``), if any."""


@dataclass(frozen=True, slots=True)
class Audio:
    chunk: int
    """The stream's chunk number (0, 1, 2...)."""
    data: bytes


@dataclass(frozen=True, slots=True)
class EndStream:
    pass


Action = OpenStream | Audio | EndStream

MEDIA_FORMAT = ("audio/x-mulaw", 8_000, 1)
"""The media format the platform sends: G.711 mu-law, 8 kHz, mono."""

BOTH_TRACKS = ("inbound", "outbound")
"""A call's two tracks: the caller's audio, and what is played to the caller."""

TRACK_LABELS = {"inbound": "customer", "outbound": "agent"}
"""Each track's speaker label, unless a custom parameter ``<track>_label`` gives one."""


class MediaStreamCall:
    """One call's media stream; see the module docstring."""

    def __init__(self, *, track: str | None = None, request: StreamRequest | None = None) -> None:
        """``track``: the one heard (None: both when the call sends both, else
        the inbound one); ``request``: the session's other options."""
        self.track = track
        self._request = request or StreamRequest()
        self.sid: str | None = None
        self.chunks = 0
        self.ended = False
        self._both: TrackInterleaver | None = None

    def go_on_from(self, chunk: int) -> None:
        """Number the chunks from ``chunk`` on: the call's stream goes on from an
        earlier connection that sent those before it."""
        self.chunks = chunk

    def detach(self) -> list[Action]:
        """The connection dropped without ``stop``: the audio still held, and no
        more; the stream is not ended here (see the module docstring)."""
        held = self._flush()
        self.ended = True
        return held

    def receive(self, text: str | bytes) -> list[Action]:
        """What the message ``text`` asks for; MediaStreamError if it cannot be taken."""
        try:
            event = _EVENT.validate_python(json.loads(text))
        except (ValueError, ValidationError) as exc:
            raise MediaStreamError(f"not a media stream message: {_reason(exc)}") from exc
        if self.ended:
            return []
        if isinstance(event, Start):
            return self._start(event.start)
        if isinstance(event, Media):
            return self._media(event.media)
        if isinstance(event, Stop):
            return self.end()
        return []

    def end(self) -> list[Action]:
        """The call is over (``stop``, or the connection closed)."""
        if self.ended or self.sid is None:
            self.ended = True
            return []
        held = self._flush()
        self.ended = True
        return [*held, EndStream()]

    def _flush(self) -> list[Action]:
        if self.ended or self._both is None:
            return []
        return self._audio(self._both.flush())

    def _audio(self, data: bytes) -> list[Action]:
        if not data:
            return []
        self.chunks += 1
        return [Audio(self.chunks - 1, data)]

    def _start(self, start: StartData) -> list[Action]:
        if self.sid is not None:
            raise MediaStreamError("a second start on one media stream")
        fmt = start.media_format
        if (fmt.encoding, fmt.sample_rate, fmt.channels) != MEDIA_FORMAT:
            raise MediaStreamError(
                f"media format {fmt.encoding} at {fmt.sample_rate} Hz, {fmt.channels} channel(s) "
                "is not audio/x-mulaw at 8000 Hz, mono"
            )
        self.sid = validate_sid(f"call-{start.call_sid}")
        update: dict[str, Any] = {
            "encoding": AudioEncoding.MULAW,
            "sample_rate": 8_000,
            "frame_ms": 20,
        }
        if self.track is None and set(BOTH_TRACKS) <= set(start.tracks):
            self._both = TrackInterleaver(BOTH_TRACKS)
            labels = tuple(_label(start, track) for track in BOTH_TRACKS)
            if labels[0] == labels[1]:
                raise MediaStreamError(f"both tracks are labelled {labels[0]}: give two labels")
            update |= {"channels": ChannelMode.SEPARATE, "channel_labels": labels}
        request = self._request.model_copy(update=update)
        key = start.custom_parameters.get("key")
        return [OpenStream(self.sid, request, start.call_sid, start.stream_sid, key)]

    def _media(self, media: MediaData) -> list[Action]:
        if self.sid is None:
            raise MediaStreamError("media before start")
        both = self._both
        if both is None and media.track != (self.track or "inbound"):
            return []
        if both is not None and media.track not in both.tracks:
            raise MediaStreamError(f"media of track {media.track[:20]!r}: not inbound nor outbound")
        try:
            data = base64.b64decode(media.payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MediaStreamError(f"a media payload that is not base64 ({exc})") from exc
        if both is not None:
            data = both.add(media.track, data, media.timestamp)
        return self._audio(data)


def _label(start: StartData, track: str) -> str:
    """Track ``track``'s speaker label: its custom parameter, or the default."""
    label = start.custom_parameters.get(f"{track}_label", TRACK_LABELS[track])
    try:
        return validate_speaker(label)
    except ValueError as exc:
        raise MediaStreamError(f"custom parameter {track}_label: {exc}") from exc


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first: dict[str, Any] = dict(exc.errors()[0])
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)
