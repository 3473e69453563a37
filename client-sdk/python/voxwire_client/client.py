"""The Python SDK: upload audio, follow a session over MQTT, get a typed transcript.

``AsyncClient`` is the real implementation; ``Client``
(:mod:`voxwire_client.sync`) runs it on a private event loop for synchronous code.

Delivery guarantees the SDK gives on top of MQTT QoS 1: every message of a session is yielded
exactly once and in ``seq`` order. Duplicates are dropped; a gap (a message arrives before an
earlier one) or a reconnect makes the SDK fetch the missing part from the gateway's history API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
from paho.mqtt.enums import MQTTProtocolVersion
from pydantic import TypeAdapter, ValidationError

from voxwire_client._mqtt import ProtocolRefused, SessionSubscription
from voxwire_client.api import (
    MessagesPage,
    PromptChange,
    PromptSpec,
    RedactMode,
    SearchPage,
    SearchQuery,
    SessionCreated,
    SessionInfo,
    SpeakerBounds,
    StreamControl,
    StreamCreated,
    StreamRequest,
    TokenRequest,
    TokenResponse,
    TranscriptFormat,
    TranscriptResponse,
)
from voxwire_client.config import ClientConfig, load_config
from voxwire_client.encodings import AudioEncoding, chunk_bytes
from voxwire_client.errors import (
    ApiError,
    AuthenticationError,
    ConnectionFailedError,
    TranscriptionFailed,
)
from voxwire_client.messages import (
    ErrorMessage,
    MatchData,
    MatchMessage,
    Message,
    SegmentData,
    SegmentMessage,
    Task,
    TranscriptMessage,
    is_terminal,
    parse_message,
)
from voxwire_client.options import SessionOptions
from voxwire_client.sequencer import Sequencer
from voxwire_client.topics import validate_sid
from voxwire_client.uploads import Prompts, form_fields, session_options
from voxwire_client.versions import RetranscribeAccepted, RetranscribeRequest

IDLE_POLL_S = 5.0
"""Without MQTT traffic for this long, the SDK asks the history API."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """The outcome of a transcription."""

    sid: str
    text: str
    segments: tuple[SegmentData, ...]
    matches: tuple[MatchData, ...]
    language: str | None
    duration_ms: int
    task: Task = Task.TRANSCRIBE
    """``translate``: the text is in English, ``language`` is the one spoken."""


def pcm_chunks(
    pcm: bytes,
    chunk_ms: int = 100,
    *,
    encoding: AudioEncoding = AudioEncoding.PCM16,
    sample_rate: int = 16_000,
) -> Iterator[bytes]:
    """Split mono audio into chunks of ``chunk_ms``: PCM16LE at 16 kHz, or the
    samples of another ``encoding`` (``mulaw``, ``alaw``) and ``sample_rate``."""
    size = chunk_bytes(encoding, sample_rate, chunk_ms)
    for start in range(0, len(pcm), size):
        yield pcm[start : start + size]


_SESSIONS = TypeAdapter(list[SessionInfo])


class AsyncClient:
    """Talks to one voxwire platform; defaults come from :func:`load_config`."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        mqtt_url: str | None = None,
        *,
        config: ClientConfig | None = None,
        timeout: float = 60.0,
        mqtt_ca_file: str | None = None,
    ) -> None:
        base = config or load_config(url=url)  # the key of the installation at ``url``
        self.config = ClientConfig(
            url=url or base.url,
            api_key=api_key or base.api_key,
            mqtt_url=mqtt_url or base.mqtt_url,
            ws_url=base.ws_url,
            mqtt_ca_file=mqtt_ca_file or base.mqtt_ca_file,
            installation=base.installation,
        )
        key = self.config.require_key()
        self._http = httpx.AsyncClient(
            base_url=self.config.url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        )
        self.subscriptions: dict[str, SessionSubscription] = {}
        # MQTT 5 until the broker refuses it; then 3.1.1 for every later session
        self._protocols: tuple[MQTTProtocolVersion, ...] = (
            MQTTProtocolVersion.MQTTv5,
            MQTTProtocolVersion.MQTTv311,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- HTTP ---------------------------------------------------------------

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a 429 (the tenant's rate limit) is waited out and sent
        again, up to ``_RATE_LIMIT_RETRIES`` times (not an upload: its file was read)."""
        for retry in range(_RATE_LIMIT_RETRIES + 1):
            response = await self._send(method, path, **kwargs)
            if response.status_code != 429 or retry == _RATE_LIMIT_RETRIES or "files" in kwargs:
                break
            await asyncio.sleep(_retry_after(response))
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        # A GET or DELETE is retried when a kept-alive connection was closed by the server
        # just as it was reused (a race every HTTP/1.1 client meets); a POST never is.
        attempts = 3 if method in ("GET", "DELETE") else 1  # idempotent
        for attempt in range(attempts):
            try:
                response = await self._http.request(method, path, **kwargs)
                break
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if attempt + 1 < attempts:
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise self._unreachable(exc) from exc
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
        return response

    def _unreachable(self, exc: Exception) -> ConnectionFailedError:
        return ConnectionFailedError(
            f"cannot reach the gateway at {self.config.url}: {exc}",
            hint="is voxwire running? start it with `make run`",
        )

    async def upload(
        self,
        path: str | Path,
        prompts: Prompts = None,
        *,
        redact: RedactMode | str | None = None,
        language: str | None = None,
        model: str | None = None,
        diarize: SpeakerBounds | bool = False,
        vocabulary: Sequence[str] = (),
        task: Task | str = Task.TRANSCRIBE,
        keep_original_audio: bool = False,
        options: SessionOptions | None = None,
        callback: str | None = None,
    ) -> SessionCreated:
        """Upload an audio file; returns the new session. ``redact``: what becomes
        of personal data in the transcript (default: the platform's setting);
        ``language``: a code such as "de", or "auto" to detect it; ``model``: one
        of the models the platform serves (default: its first); ``diarize``: label
        every segment with its speaker (``SpeakerBounds`` to bound their count);
        ``vocabulary``: words to expect, written as given (names, product terms);
        ``task``: "translate" for the text in English (a multilingual model);
        ``keep_original_audio``: with redaction, keep the audio as recorded too.
        ``options``: all of these as one :class:`SessionOptions` (the keywords are
        then not read). ``callback``: an http(s) URL that gets the transcript,
        signed, once it is stored (:mod:`voxwire_client.webhooks`)."""
        path = Path(path)
        if options is None:
            options = session_options(
                prompts,
                redact=redact,
                language=language,
                model=model,
                diarize=diarize,
                vocabulary=vocabulary,
                task=task,
                keep_original_audio=keep_original_audio,
            )
        data = form_fields(options)
        if callback:
            data["callback"] = callback
        for retry in range(_RATE_LIMIT_RETRIES + 1):
            with path.open("rb") as fh:
                response = await self._send(
                    "POST",
                    "/v1/sessions",
                    files={"file": (path.name, fh, "application/octet-stream")},
                    data=data,
                )
            if response.status_code != 429 or retry == _RATE_LIMIT_RETRIES:
                break
            await asyncio.sleep(_retry_after(response))
        if response.status_code >= 400:
            raise _api_error(response)
        return SessionCreated.model_validate_json(response.content)

    async def session(self, sid: str) -> SessionInfo:
        response = await self._request("GET", f"/v1/sessions/{validate_sid(sid)}")
        return SessionInfo.model_validate_json(response.content)

    async def transcript(self, sid: str) -> TranscriptResponse:
        response = await self._request("GET", f"/v1/sessions/{validate_sid(sid)}/transcript")
        return TranscriptResponse.model_validate_json(response.content)

    async def transcript_as(self, sid: str, format: TranscriptFormat | str) -> str:
        """The transcript as a file's text: ``txt``, ``srt`` or ``vtt`` (``json``:
        the JSON body as text; :meth:`transcript` parses it)."""
        path = f"/v1/sessions/{validate_sid(sid)}/transcript"
        params = {"format": TranscriptFormat(format).value}
        return (await self._request("GET", path, params=params)).text

    async def history(self, sid: str, after: int = 0) -> MessagesPage:
        """Every stored message of the session with ``seq > after``."""
        response = await self._request(
            "GET", f"/v1/sessions/{validate_sid(sid)}/messages", params={"after": after}
        )
        return MessagesPage.model_validate_json(response.content)

    async def change_prompts(
        self, sid: str, add: Sequence[PromptSpec] = (), remove: Sequence[str] = ()
    ) -> PromptChange:
        """Add or remove (by id) standing prompts of a live stream; they apply from
        its next final. A change the worker cannot apply comes back as an error event."""
        change = PromptChange(add=tuple(add), remove=tuple(remove))
        await self._request(
            "POST", f"/v1/sessions/{validate_sid(sid)}/prompts",
            content=change.model_dump_json(), headers={"content-type": "application/json"},
        )  # fmt: skip
        return change

    async def create_token(self, sids: Sequence[str], ttl_s: int = 3600) -> TokenResponse:
        """A short-lived token to hand to a browser (or any client that must not
        hold your API key): it connects to the broker with ``username`` and
        ``token`` as password and reaches only these sessions."""
        body = TokenRequest(sids=tuple(sids), ttl_s=ttl_s).model_dump_json()
        response = await self._request(
            "POST", "/v1/tokens", content=body, headers={"content-type": "application/json"}
        )
        return TokenResponse.model_validate_json(response.content)

    async def search(self, query: SearchQuery | str, **filters: Any) -> SearchPage:
        """Segments of your transcripts that answer ``query``, best first.

        ``query`` is a :class:`SearchQuery` or its ``q`` text, with the other
        fields as keywords: ``await client.search("fellow americans", fuzzy=True)``,
        ``await client.search("budget", speaker="S2")`` (what S2 said, diarized sessions).
        """
        if isinstance(query, str):
            query = SearchQuery.model_validate({"q": query, **filters})
        response = await self._request(
            "POST", "/v1/search", content=query.model_dump_json(exclude_none=True),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        return SearchPage.model_validate_json(response.content)

    # -- following a session ------------------------------------------------

    async def events(self, sid: str, *, after_seq: int = 0) -> AsyncGenerator[Message]:
        """Yield the session's messages in ``seq`` order, once each, until it ends."""
        validate_sid(sid)
        inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        subscription = await self._subscribe(sid, inbox)
        self.subscriptions[sid] = subscription
        sequencer = Sequencer(last_seq=after_seq)
        ended = False
        try:
            while True:
                try:
                    item = await asyncio.wait_for(inbox.get(), IDLE_POLL_S)
                except TimeoutError:
                    item = None
                if item is None:  # (re)connected or idle: catch up from history
                    ready = await self._catch_up(sid, sequencer)
                else:
                    ready = self._offer_payload(sequencer, item)
                    if sequencer.has_gap:
                        ready += await self._catch_up(sid, sequencer)
                for message in ready:
                    ended = is_terminal(message)
                    yield message
                    if ended:
                        return
        finally:
            self.subscriptions.pop(sid, None)
            await asyncio.to_thread(subscription.close, end_session=ended)

    async def _subscribe(
        self, sid: str, inbox: asyncio.Queue[bytes | None], timeout: float = 10.0
    ) -> SessionSubscription:
        """Connect (MQTT 5, else 3.1.1, which this client then keeps to for its
        later sessions) and subscribe. Every later reconnect puts None in
        ``inbox`` so that the caller catches up from history."""
        loop = asyncio.get_running_loop()
        for protocol in self._protocols:
            first: asyncio.Future[Exception | None] = loop.create_future()

            def on_connect(
                failure: Exception | None, first: asyncio.Future[Exception | None] = first
            ) -> None:
                loop.call_soon_threadsafe(_connected, first, inbox, failure)

            subscription = SessionSubscription(
                self.config.mqtt_url,
                self.config.require_key(),
                sid,
                protocol,
                on_payload=lambda payload: _post(loop, inbox, payload),
                on_connect=on_connect,
                ca_file=self.config.mqtt_ca_file,
            )
            subscription.begin()
            try:
                failure = await asyncio.wait_for(first, timeout)
            except TimeoutError:
                failure = ConnectionFailedError(
                    "the MQTT broker did not answer in time", hint="is voxwire running?"
                )
            if failure is None:
                return subscription
            await asyncio.to_thread(subscription.close)
            if not isinstance(failure, ProtocolRefused):
                raise failure
            self._protocols = (MQTTProtocolVersion.MQTTv311,)
        raise ConnectionFailedError("the MQTT broker refused both MQTT 5 and MQTT 3.1.1")

    @staticmethod
    def _offer_payload(sequencer: Sequencer, payload: bytes) -> list[Message]:
        try:
            return sequencer.offer(parse_message(payload))
        except ValidationError:
            return []  # not a message of this contract version: ignore it

    async def _catch_up(self, sid: str, sequencer: Sequencer) -> list[Message]:
        page = await self.history(sid, after=sequencer.last_seq)
        ready: list[Message] = []
        for message in page.messages:
            ready += sequencer.offer(message)
        return ready

    async def transcribe(
        self,
        path: str | Path,
        prompts: Prompts = None,
        *,
        on_event: Callable[[Message], None] | None = None,
        redact: RedactMode | str | None = None,
        language: str | None = None,
        model: str | None = None,
        vocabulary: Sequence[str] = (),
        task: Task | str = Task.TRANSCRIBE,
    ) -> Transcript:
        """Upload ``path`` (see :meth:`upload`), follow the session, return the transcript."""
        created = await self.upload(
            path,
            prompts,
            redact=redact,
            language=language,
            model=model,
            vocabulary=vocabulary,
            task=task,
        )
        return await self.follow(created.sid, on_event=on_event)

    async def sessions(self, limit: int = 100) -> list[SessionInfo]:
        """The caller's latest sessions (at most ``limit``, up to 1000), newest first."""
        response = await self._request("GET", "/v1/sessions", params={"limit": limit})
        return _SESSIONS.validate_json(response.content)

    async def delete(self, sid: str) -> None:
        """Delete the session everywhere (its audio, transcripts, messages, search
        entries and retained messages; a live stream is ended first). Deleting a
        deleted session again succeeds; anything else about it raises ApiError (404)."""
        await self._request("DELETE", f"/v1/sessions/{validate_sid(sid)}")

    async def retranscribe(
        self,
        sid: str,
        *,
        model: str | None = None,
        language: str | None = None,
        vocabulary: Sequence[str] = (),
        task: Task | None = None,
    ) -> RetranscribeAccepted:
        """Transcribe a finished session's stored audio again, as its next version
        (``model``: one the platform serves; ``task`` translate: in English).
        Follow it with :meth:`version_events`."""
        request = RetranscribeRequest(
            model=model,
            language=language,
            vocabulary=tuple(vocabulary),
            **({"task": task} if task is not None else {}),
        )
        response = await self._request(
            "POST",
            f"/v1/sessions/{validate_sid(sid)}/retranscribe",
            json=request.model_dump(exclude_defaults=True),
        )
        return RetranscribeAccepted.model_validate_json(response.content)

    def version_events(self, accepted: RetranscribeAccepted) -> AsyncGenerator[Message]:
        """The messages of the version ``accepted`` makes, once each, in order, to its end."""
        return self.events(accepted.sid, after_seq=accepted.first_seq - 1)

    async def transcript_version(self, sid: str, version: int) -> TranscriptResponse:
        """The transcript of ``version`` (kept when a later one replaced it)."""
        path = f"/v1/sessions/{validate_sid(sid)}/transcript"
        response = await self._request("GET", path, params={"version": version})
        return TranscriptResponse.model_validate_json(response.content)

    async def audio(self, sid: str, *, original: bool = False) -> bytes:
        """The session's audio: the upload as it came, else WAV; a redacted
        session's with the redacted spans silenced. ``original``: a redacted
        session's audio as recorded, when it was kept (``keep_original_audio``),
        for an API key (a session token is refused)."""
        path = f"/v1/sessions/{validate_sid(sid)}/audio"
        params = {"original": "true"} if original else None
        response = await self._request("GET", path, params=params)
        return response.content

    async def start_stream(self, request: StreamRequest | None = None) -> StreamCreated:
        """Open a live stream session (then publish audio on its topics)."""
        body = (request or StreamRequest()).model_dump(mode="json")
        response = await self._request("POST", "/v1/streams", json=body)
        return StreamCreated.model_validate_json(response.content)

    async def stream(
        self,
        chunks: Iterable[bytes | StreamControl],
        request: StreamRequest | None = None,
        *,
        chunk_ms: int = 100,
        speed: float = 1.0,
        on_event: Callable[[Message], None] | None = None,
    ) -> Transcript:
        """Stream ``chunks`` in the request's encoding (PCM16LE 16 kHz mono by
        default, G.711, or one Opus packet each), each ``chunk_ms`` long, in
        real time (``speed`` > 1 plays faster), then end the stream and return
        the transcript once the last final is in. A :class:`StreamControl` among
        the chunks is published on the control topic in its place
        (``StreamControl.FLUSH``: the open utterance's final now)."""
        created = await self.start_stream(request)
        following = asyncio.create_task(self.follow(created.sid, on_event=on_event))
        while created.sid not in self.subscriptions:
            if following.done():
                return following.result()
            await asyncio.sleep(0.01)
        subscription = self.subscriptions[created.sid]
        loop = asyncio.get_running_loop()
        started = loop.time()
        n = 0
        for chunk in chunks:
            if isinstance(chunk, StreamControl):
                subscription.publish(created.control_topic, chunk.payload)
                continue
            subscription.publish(f"{created.audio_topic}/{n}", chunk)
            n += 1
            due = started + n * chunk_ms / 1000 / speed
            await asyncio.sleep(max(0.0, due - loop.time()))
        subscription.publish(created.control_topic, StreamControl.END.payload)
        return await following

    async def follow(
        self, sid: str, *, on_event: Callable[[Message], None] | None = None
    ) -> Transcript:
        """Follow an existing session to its end."""
        segments: dict[int, SegmentData] = {}
        matches: list[MatchData] = []
        final: TranscriptMessage | None = None
        async for message in self.events(sid):
            if on_event is not None:
                on_event(message)
            if isinstance(message, SegmentMessage) and message.type == "final":
                segments[message.segment.index] = message.segment
            elif isinstance(message, MatchMessage):
                matches.append(message.data())
            elif isinstance(message, TranscriptMessage):
                final = message
            elif isinstance(message, ErrorMessage) and message.fatal:
                raise TranscriptionFailed(
                    message.message, code=message.code, sid=sid, hint=message.hint
                )
        ordered = tuple(segments[i] for i in sorted(segments))
        if final is not None:
            ordered = final.segments
        return Transcript(
            sid=sid,
            text=final.text if final else " ".join(s.text for s in ordered).strip(),
            segments=ordered,
            matches=tuple(matches),
            language=final.language if final else None,
            duration_ms=final.duration_ms if final else 0,
            task=final.task if final else Task.TRANSCRIBE,
        )


def _connected(
    first: asyncio.Future[Exception | None],
    inbox: asyncio.Queue[bytes | None],
    failure: Exception | None,
) -> None:
    """On the loop: settle the first connection attempt, or signal a reconnect."""
    if not first.done():
        first.set_result(failure)
    if failure is None:
        inbox.put_nowait(None)


def _post(
    loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[bytes | None], item: bytes | None
) -> None:
    """Hand ``item`` from paho's thread to the event loop's queue."""
    loop.call_soon_threadsafe(inbox.put_nowait, item)


_RATE_LIMIT_RETRIES = 5


def _retry_after(response: httpx.Response) -> float:
    """The seconds a 429 asks to wait (Retry-After), between 0.1 and 30."""
    try:
        return min(max(float(response.headers.get("retry-after", "1")), 0.1), 30.0)
    except ValueError:
        return 1.0


def _api_error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
        message, code, hint = body.get("message"), body.get("code", "api"), body.get("hint")
    except (json.JSONDecodeError, AttributeError):
        message, code, hint = None, "api", None
    message = message or f"the gateway answered {response.status_code}"
    cls = AuthenticationError if response.status_code in (401, 403) else ApiError
    if cls is AuthenticationError and hint is None:
        hint = "check VOXWIRE_API_KEY, or create a key with `voxwire keys create`"
    return cls(message, status=response.status_code, code=code, hint=hint)
