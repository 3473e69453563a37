"""Bodies of the gateway's HTTP API (pydantic v2 models)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from voxwire_client.encodings import NATIVE_RATES, check_format
from voxwire_client.encodings import OPUS_FRAME_MS as OPUS_FRAME_MS
from voxwire_client.encodings import AudioCodec as AudioCodec
from voxwire_client.encodings import AudioEncoding as AudioEncoding
from voxwire_client.messages import MatchData as MatchData
from voxwire_client.messages import Message, SegmentData, SessionStatus, Task, TaskField
from voxwire_client.options import (
    ENDPOINTING_FIELDS,
    Endpointing,
    SessionOptions,
    diarize_flag_in_schema,
)
from voxwire_client.options import MAX_SPEAKERS as MAX_SPEAKERS
from voxwire_client.options import SPEAKER_PATTERN as SPEAKER_PATTERN
from voxwire_client.options import ChannelMode as ChannelMode
from voxwire_client.options import PromptSpec as PromptSpec
from voxwire_client.options import RedactMode as RedactMode
from voxwire_client.options import SpeakerBounds as SpeakerBounds
from voxwire_client.options import SpeakerLabel as SpeakerLabel
from voxwire_client.options import Vocabulary as Vocabulary
from voxwire_client.options import validate_speaker as validate_speaker
from voxwire_client.topics import validate_sid
from voxwire_client.usage import QuotaExceeded


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


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
    version: int = Field(default=1, description="the latest transcript version asked for")


class SessionCreated(SessionInfo):
    endpoints: Endpoints


class TranscriptFormat(StrEnum):
    """What ``GET /v1/sessions/{sid}/transcript?format=`` returns: ``json`` (the
    default, a :class:`TranscriptResponse`), ``txt`` (a line per segment),
    ``srt`` (SubRip) or ``vtt`` (WebVTT) subtitles; speakers, where segments
    have them, as ``S1: `` (txt, srt) or a ``<v S1>`` voice span (vtt)."""

    JSON = "json"
    TXT = "txt"
    SRT = "srt"
    VTT = "vtt"


class TranscriptResponse(_Model):
    sid: str
    status: SessionStatus
    text: str
    language: str | None = None
    duration_ms: int = 0
    segments: tuple[SegmentData, ...]
    matches: tuple[MatchData, ...] = ()
    task: TaskField = Task.TRANSCRIBE
    version: int = Field(default=1, description="this transcript's version")
    versions: tuple[int, ...] = Field(default=(1,), description="the versions kept")


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
    quota: QuotaExceeded | None = None
    """With ``quota_exceeded`` (HTTP 429): the quota, its limit, the use and when it resets."""


class Health(_Model):
    status: str = Field(description="ok; stuck (HTTP 503) when a part stopped making progress")
    version: str
    mode: str
    workers: int
    model: str
    device: str | None = None
    """Where the engines of the answering process run: ``cuda:0 (NVIDIA H200)``,
    ``cpu``; None when they run in other processes."""
    models: tuple[str, ...] = Field(
        default=(), description="the models a session may ask for (the first is the default)"
    )
    routes: dict[str, str] = Field(
        default_factory=dict,
        description="language -> the model of a session that names none ('*': the others)",
    )
    problems: dict[str, str] = Field(
        default_factory=dict,
        description="with status stuck: what stopped making progress and how (engines, "
        "event loop, consumers)",
    )


def _flat_endpointing_in_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema says what :meth:`StreamRequest._flat_endpointing` takes, and
    what :class:`SessionOptions` does."""
    diarize_flag_in_schema(schema)
    schema["properties"].setdefault(
        "codec",
        {
            "type": "string",
            "enum": [e.value for e in AudioEncoding],
            "description": "the earlier name of encoding",
        },
    )
    for name, field in Endpointing.model_fields.items():
        if name not in ENDPOINTING_FIELDS:
            continue
        schema["properties"].setdefault(
            name, {"type": "number", "description": f"{field.description} (as endpointing.{name})"}
        )


class StreamRequest(SessionOptions):
    """Start a live stream: ``POST /v1/streams``. Then publish chunks on
    ``audio/<sid>/chunk/<n>`` (n = 0, 1, 2, ...; QoS 1; well under 1 MB) in the
    stream's ``encoding`` at its ``sample_rate`` (:mod:`voxwire_client.encodings`):
    by default PCM16LE 16 kHz mono (e.g. 100 ms = 3200 bytes), with
    ``encoding="mulaw"`` G.711 at 8 kHz (20 ms = 160 bytes), with ``"opus"`` one
    Opus packet of ``frame_ms`` each; then ``{"type": "end"}`` on ``audio/<sid>/control``.
    With ``channels="separate"`` each chunk holds interleaved frames of the
    channels (PCM16 or G.711; as many as ``channel_labels``, 2 without them),
    and each channel is transcribed on its own, its finals labelled.
    ``codec`` is accepted for ``encoding``, as requests named it before.
    A live stream finds its speakers as they come: ``diarize`` takes ``max_speakers``
    only."""

    model_config = ConfigDict(json_schema_extra=_flat_endpointing_in_schema)

    endpointing: Endpointing = Field(
        default_factory=Endpointing, description="when an utterance ends (the defaults: fine)"
    )
    encoding: AudioEncoding = Field(
        default=AudioEncoding.PCM16,
        validation_alias=AliasChoices("encoding", "codec"),
        description="how the chunks hold the audio: pcm16, opus, mulaw or alaw "
        "(also accepted as codec)",
    )
    sample_rate: int | None = Field(
        default=None,
        description="samples per second of the chunks: pcm16 8000, 16000 or 48000; mulaw and "
        "alaw 8000 or 16000; opus the encoder's (8000-48000). None: pcm16 16000, mulaw and "
        "alaw 8000, opus 48000",
    )
    frame_ms: int = Field(
        default=20,
        description="with opus: the duration of each chunk's packet, one of "
        + ", ".join(map(str, OPUS_FRAME_MS))
        + " ms, a packet that does not decode is replaced by this much silence; "
        "with pcm16, mulaw and alaw: the chunks' usual length (10-1000 ms)",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_endpointing(cls, data: Any) -> Any:
        """Endpointing settings given at the top level join ``endpointing``."""
        if not isinstance(data, dict) or not ENDPOINTING_FIELDS & data.keys():
            return data
        flat = {k: v for k, v in data.items() if k in ENDPOINTING_FIELDS}
        nested = data.get("endpointing") or {}
        if isinstance(nested, str):  # a policy alone
            nested = {"policy": nested}
        if isinstance(nested, Endpointing):
            nested = nested.model_dump(exclude_unset=True)
        rest = {k: v for k, v in data.items() if k not in ENDPOINTING_FIELDS}
        return {**rest, "endpointing": {**nested, **flat}}

    @model_validator(mode="before")
    @classmethod
    def _one_encoding(cls, data: Any) -> Any:
        """``codec`` (the name before ``encoding``) and ``encoding`` may not disagree."""
        if isinstance(data, dict) and "codec" in data and "encoding" in data:
            if data["codec"] != data["encoding"]:
                raise ValueError("give encoding only (codec is its earlier name)")
            data = {k: v for k, v in data.items() if k != "codec"}
        return data

    @model_validator(mode="after")
    def _format(self) -> StreamRequest:
        check_format(self.encoding, self.rate, self.frame_ms)
        return self

    @property
    def rate(self) -> int:
        """The chunks' sample rate: ``sample_rate``, or the encoding's own."""
        return self.sample_rate or NATIVE_RATES[self.encoding]

    @property
    def codec(self) -> AudioEncoding:
        """``encoding``, by its earlier name."""
        return self.encoding

    @model_validator(mode="after")
    def _interleaved(self) -> StreamRequest:
        if self.channels is ChannelMode.SEPARATE and self.encoding is AudioEncoding.OPUS:
            raise ValueError(
                "separate channels come as interleaved pcm16, mulaw or alaw frames: "
                "an opus stream is one channel (stream each party as its own session)"
            )
        return self

    @property
    def audio_channels(self) -> int:
        """How many channels each chunk interleaves: with ``channels`` separate,
        one per label of ``channel_labels`` (2 without labels); else 1."""
        if self.channels is not ChannelMode.SEPARATE:
            return 1
        return len(self.channel_labels) if self.channel_labels else 2

    @field_validator("diarize")
    @classmethod
    def _live_speakers(cls, bounds: SpeakerBounds | None) -> SpeakerBounds | None:
        if bounds is not None and bounds.min_speakers is not None:
            raise ValueError(
                "a live stream finds its speakers as they come: give max_speakers only"
            )
        return bounds


class TokenRequest(_Model):
    """Ask for a session token (``POST /v1/tokens``) to hand to a browser: it
    connects to the broker with it as password and may follow, and stream
    audio to, only these sessions, until the token expires."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sids: tuple[Annotated[str, AfterValidator(validate_sid)], ...] = Field(
        min_length=1, max_length=50
    )
    ttl_s: int = Field(default=3600, ge=60, le=24 * 3600)


class TokenResponse(_Model):
    """Connect with ``username`` and ``token`` as password (MQTT 5 over WSS from
    a browser); ``expires_at`` is in Unix seconds. The token is also a bearer
    credential for the session routes of the sessions it names (status,
    transcript, history, audio, prompts)."""

    token: str
    username: str
    sids: tuple[str, ...]
    expires_at: int
    ws_url: str = Field(description="the broker's MQTT-over-WebSocket URL")


class PromptChange(_Model):
    """Change a live stream's standing prompts while it runs: the body of
    ``POST /v1/sessions/{sid}/prompts``, or published as is on
    ``audio/<sid>/control``. Removals first, then additions; all or nothing.
    New prompts match from the next final on, together with the finals just
    before it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["prompts"] = "prompts"
    add: tuple[PromptSpec, ...] = Field(default=(), max_length=100)
    remove: tuple[Annotated[str, Field(max_length=64)], ...] = Field(default=(), max_length=100)


class StreamControl(StrEnum):
    """The other messages of a stream's ``audio/<sid>/control``: ``{"type": <value>}``.

    - ``end``: the stream is over; its last final, the transcript and a
      ``completed`` progress message follow;
    - ``flush``: close the open utterance now, without waiting for the pause
      that ends it (push-to-talk released, a client that knows the turn is
      over): its audio so far is transcribed and sent as a final marked
      ``flushed``; the stream goes on. Nothing comes when no speech is open.
    """

    END = "end"
    FLUSH = "flush"

    @property
    def payload(self) -> bytes:
        """The message to publish."""
        return f'{{"type": "{self.value}"}}'.encode()


class StreamCreated(SessionInfo):
    endpoints: Endpoints
    audio_topic: str = Field(description="publish chunk n on <audio_topic>/<n>")
    control_topic: str


MAX_QUERY_CHARS = 500
MAX_PAGE = 100
MAX_OFFSET = 1_000


class SearchQuery(_Model):
    """Search the caller's transcripts: ``POST /v1/search``.

    ``q`` is words (all required, in any order) and "quoted phrases" (words
    in this order); case, accents, punctuation and the spelling of numbers do
    not matter ("twelve percent" finds "12%"), words are stemmed ("count"
    finds "counted"), and with ``fuzzy`` a word also finds words one or two
    letters away ("amercans" finds "Americans"). No other syntax: anything
    else in ``q`` is searched as text.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    q: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    sids: tuple[Annotated[str, AfterValidator(validate_sid)], ...] | None = Field(
        default=None, max_length=100, description="only these sessions"
    )
    start_ms: int | None = Field(
        default=None, ge=0, description="only segments ending after this point of the audio"
    )
    end_ms: int | None = Field(
        default=None, ge=0, description="only segments starting before this point of the audio"
    )
    created_from: datetime | None = Field(default=None, description="sessions created from")
    created_to: datetime | None = Field(default=None, description="sessions created before")
    language: str | None = Field(default=None, pattern=r"^[a-z]{2,3}$")
    speaker: SpeakerLabel | None = Field(
        default=None,
        description="only segments said by this speaker (S1, S2...: diarized sessions)",
    )
    fuzzy: bool = False
    size: int = Field(default=10, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> SearchQuery:
        if self.start_ms is not None and self.end_ms is not None and self.end_ms <= self.start_ms:
            raise ValueError("end_ms must be after start_ms")
        if self.created_from and self.created_to and self.created_to <= self.created_from:
            raise ValueError("created_to must be after created_from")
        return self


class SearchHit(_Model):
    """One segment that answers a query, or consecutive segments that answer it
    together (a phrase said across a pause). ``segment_ids`` are the segments,
    ``segment_id`` and ``index`` the first of them; ``start_ms``/``end_ms`` and
    ``text`` cover them all. ``highlight`` is the text, HTML-escaped, with the
    words that matched wrapped in ``<em>``. ``speaker`` is the segments'
    speaker (S1, S2...) where the session was diarized and they share one."""

    sid: str
    segment_id: str
    index: int
    start_ms: int
    end_ms: int
    text: str
    highlight: str
    score: float
    segment_ids: tuple[str, ...] = ()
    speaker: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_segment(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("segment_ids") and "segment_id" in data:
            return {**data, "segment_ids": (data["segment_id"],)}
        return data


class SearchPage(_Model):
    """Hits best first; when ``more``, ask again with ``offset + size``."""

    hits: tuple[SearchHit, ...]
    offset: int
    size: int
    more: bool


class OpenStream(_Model):
    """Open a live stream over MQTT alone: published on
    ``query/<key id>/<qid>/request`` (the same topics as a search), answered on
    ``query/<key id>/<qid>/result`` with :attr:`QueryResult.stream` (the sid and
    the topics to publish on, as ``POST /v1/streams`` answers) or an error. Then
    stream, change prompts and end the stream on the session's audio topics."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["open_stream"]
    stream: StreamRequest = Field(default_factory=StreamRequest)


class GetTranscript(_Model):
    """Read a session's transcript over MQTT alone (as
    ``GET /v1/sessions/{sid}/transcript`` answers): answered with
    :attr:`QueryResult.transcript`, or ``not_found`` for a session of another tenant
    (with a device key: any session it did not open)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["transcript"]
    sid: Annotated[str, AfterValidator(validate_sid)]


class DeleteSession(_Model):
    """Delete a session over MQTT alone (as ``DELETE /v1/sessions/{sid}``): answered
    with :attr:`QueryResult.deleted`, or ``not_found`` for a session of another
    tenant (with a device key: any session it did not open). Asking again for a
    deleted session answers ``deleted`` again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["delete_session"]
    sid: Annotated[str, AfterValidator(validate_sid)]


class SessionDeleted(_Model):
    """A session deleted: it answers ``not_found`` everywhere from now on."""

    sid: str


MAX_UPLOAD_PART_BYTES = 256 * 1024
"""The largest part of a file uploaded over MQTT."""


class UploadStatus(_Model):
    """Which parts of a file uploaded over MQTT the platform holds: answered with
    :attr:`QueryResult.upload`. A device that reconnects asks it, then publishes
    only the parts still missing. The parts go, as raw bytes of at most
    :data:`MAX_UPLOAD_PART_BYTES`, on ``query/<key id>/<upload id>/part/<n>``
    (n = 0, 1, ...; QoS 1), where the upload id is the device's choice."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["upload_status"]
    upload: Annotated[str, AfterValidator(validate_sid)]


class FinishUpload(SessionOptions):
    """Transcribe a file uploaded over MQTT once its ``parts`` parts are in
    (:class:`UploadStatus`), with the options an upload takes
    (:class:`SessionOptions`): answered with :attr:`QueryResult.session` (as that
    request answers), or an error naming the parts still missing. Asking again
    answers with the same session."""

    op: Literal["finish_upload"]
    upload: Annotated[str, AfterValidator(validate_sid)]
    parts: int = Field(ge=1, le=10_000, description="how many parts the file was cut into")
    sha256: str | None = Field(
        default=None, pattern="^[0-9a-f]{64}$", description="of the whole file: checked if given"
    )
    filename: str | None = Field(default=None, max_length=200)


class UploadParts(_Model):
    """The parts of a file uploaded over MQTT that the platform holds."""

    upload: str
    parts: tuple[int, ...] = Field(description="the part numbers held, in order")
    bytes: int = Field(description="their size together")


SessionRequest = Annotated[
    OpenStream | GetTranscript | UploadStatus | FinishUpload | DeleteSession,
    Field(discriminator="op"),
]
"""A request about sessions sent over MQTT (it has an ``op``; a search has none)."""


class QueryResult(_Model):
    """The answer to a request sent over MQTT, on ``query/<key id>/<qid>/result``:
    a page of hits (a search), the stream opened (:class:`OpenStream`), the
    transcript (:class:`GetTranscript`), the parts of an upload held
    (:class:`UploadStatus`), the session of a finished upload
    (:class:`FinishUpload`), the session deleted (:class:`DeleteSession`), or the
    error that stopped it (a part that could not
    be taken is answered with an error on its upload's result topic)."""

    qid: str
    page: SearchPage | None = None
    stream: StreamCreated | None = None
    transcript: TranscriptResponse | None = None
    upload: UploadParts | None = None
    session: SessionCreated | None = None
    deleted: SessionDeleted | None = None
    error: ErrorBody | None = None
