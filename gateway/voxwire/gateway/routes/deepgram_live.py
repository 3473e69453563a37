"""Deepgram's live listening: ``WS /v1/listen``.

The handshake is checked before the connection is accepted: the key
(:mod:`voxwire.gateway.deepgram_api.callers`) and the query parameters
(:mod:`voxwire.gateway.deepgram_api.params`); a refusal is an HTTP answer in
Deepgram's error shape (401, 400 naming the parameter...), as Deepgram refuses
a handshake. Then the connection is a voxwire live stream
(:meth:`~voxwire.sessions.streams.StreamService.start`), its id in the
handshake's ``dg-request-id`` and ``X-Voxwire-Session`` headers and in every
message's ``request_id``: stored, searchable, its messages published over MQTT
on ``transcription/<sid>/...`` like any stream's.

Two loops run while it is open. :func:`_read` takes the client's frames: audio
goes to the stream's audio topic as chunks, in order; ``Finalize`` follows
them there as the stream's ``{"type": "flush"}`` (the open utterance's final
now, sent back with ``from_finalize``); ``CloseStream`` ends the stream, and a
client that goes away ends it too. Nothing for :data:`IDLE_S` (no audio, no
``KeepAlive``) ends the stream and closes the connection as Deepgram does
(1011, ``NET-0001``). :func:`_follow` reads the session's
messages from the store by ``seq`` (where either mode records every message of
a session, whichever worker transcribes it) and sends each as Deepgram's
(:class:`~voxwire.gateway.deepgram_api.live.LiveConnection`); once the session
has ended it sends ``Metadata`` and closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from voxwire.core.errors import VoxwireError
from voxwire.gateway.context import Gateway
from voxwire.gateway.deepgram_api.callers import (
    caller,
    header_credential,
    subprotocol_credential,
)
from voxwire.gateway.deepgram_api.errors import (
    REQUEST_ID_HEADER,
    DeepgramError,
    error_response,
    from_voxwire,
    unsupported,
)
from voxwire.gateway.deepgram_api.live import LiveAudioError, LiveConnection
from voxwire.gateway.deepgram_api.params import live_request
from voxwire.gateway.deepgram_api.shapes import LiveMessage
from voxwire.gateway.routes.deepgram import CALLBACKS_REFUSED, PATH, SESSION_HEADER
from voxwire.sessions import follow
from voxwire.sessions.languages import choose
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.api import StreamControl, StreamRequest
from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.messages import SessionStatus
from voxwire_client.topics import audio_chunk_prefix, audio_control_topic

log = logging.getLogger(__name__)
router = APIRouter(tags=["deepgram"])

IDLE_S = 10.0
"""A connection that sends no audio nor ``KeepAlive`` for this long is ended, as Deepgram's is."""
POLL_S = 0.05
"""How often the store is asked for the session's new messages."""
FINISH_S = 600.0
"""How long after its end a stream may take to finish before the connection gives up."""
DATA_ERROR, IDLE_CLOSE, SERVER_ERROR = 1008, 1011, 1011
IDLE_REASON = f"NET-0001 no audio and no KeepAlive for {IDLE_S:.0f} s"
"""Deepgram's close reason for a connection ended for silence (``NET-0001``)."""


class _Link:
    """The accepted connection: sends one message at a time, closes once."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self._lock = asyncio.Lock()
        self.closed = False

    async def send(self, messages: list[LiveMessage]) -> None:
        async with self._lock:
            for message in messages:
                if not self.closed:
                    await self.websocket.send_text(message.model_dump_json(exclude_none=True))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        async with self._lock:
            if not self.closed:
                self.closed = True
                with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                    await self.websocket.close(code, reason[:120])


@router.websocket(PATH)
async def listen_live(websocket: WebSocket) -> None:
    """A live transcription in Deepgram's protocol (see the module docstring)."""
    gateway: Gateway = websocket.app.state.gateway
    offered = list(websocket.scope.get("subprotocols") or [])
    try:
        connection = await _open(gateway, websocket, offered)
    except DeepgramError as exc:
        await _refuse(websocket, exc)
        return
    except (VoxwireError, InvalidSessionIdError) as exc:
        await _refuse(websocket, from_voxwire(exc))
        return
    headers = [(REQUEST_ID_HEADER, connection.sid), (SESSION_HEADER.lower(), connection.sid)]
    await websocket.accept(
        "token" if subprotocol_credential(offered) else None,
        headers=[(k.encode(), v.encode()) for k, v in headers],
    )
    link = _Link(websocket)
    ended = asyncio.Event()
    reader = asyncio.create_task(_read(gateway, link, connection, ended))
    follower = asyncio.create_task(_follow(gateway, link, connection, ended))
    try:
        done, _ = await asyncio.wait({reader, follower}, return_when=asyncio.FIRST_COMPLETED)
        if _outcome(reader) == "idle":  # as Deepgram answers a silent client
            await link.close(IDLE_CLOSE, IDLE_REASON)
        if follower in done or _outcome(reader) in ("gone", "idle"):
            reader.cancel()
            follower.cancel()
        await asyncio.gather(reader, follower, return_exceptions=True)
    finally:
        for task in (reader, follower):
            task.cancel()
        if not ended.is_set():
            await _end(gateway, connection.sid)
        await link.close()


def _outcome(task: asyncio.Task[str]) -> str:
    """How the reader ended ("gone" when it failed); "" while it runs."""
    if not task.done():
        return ""
    if task.cancelled() or task.exception() is not None:
        return "gone"
    return task.result()


async def _open(gateway: Gateway, websocket: WebSocket, offered: list[str]) -> LiveConnection:
    credential = header_credential(websocket.headers) or subprotocol_credential(offered)
    tenant, key = await caller(gateway, credential)
    settings = gateway.ctx.settings
    asked = live_request(websocket.query_params.multi_items(), settings)
    if asked.callback is not None:
        raise unsupported("callback", CALLBACKS_REFUSED)
    request = asked.options
    assert isinstance(request, StreamRequest) and asked.raw is not None
    model = choose(settings, model=request.model, task=request.task, language=request.language)
    session = await gateway.streams.start(tenant, request, key=key)
    connection = LiveConnection(
        session.sid,
        asked.raw,
        asked.listening,
        model.model,
        max_segment_ms=int(request.endpointing.max_segment_s * 1000),
    )
    return connection


async def _refuse(websocket: WebSocket, exc: DeepgramError) -> None:
    """Refuse the handshake with Deepgram's HTTP answer (a server that cannot send
    one: close it, with the reason)."""
    try:
        await websocket.send_denial_response(error_response(exc))
    except RuntimeError:
        await websocket.close(1008, exc.message[:120])


async def _read(
    gateway: Gateway, link: _Link, connection: LiveConnection, ended: asyncio.Event
) -> str:
    """The client's frames until it closes the stream ("closed"), falls silent
    ("idle") or goes away ("gone")."""
    bus, sid = gateway.ctx.bus, connection.sid
    while True:
        try:
            message = await asyncio.wait_for(link.websocket.receive(), IDLE_S)
        except TimeoutError:
            await _end(gateway, sid, ended)
            return "idle"
        if message["type"] == "websocket.disconnect":
            await _end(gateway, sid, ended)
            return "gone"
        if message.get("bytes") is not None:
            try:
                chunks = connection.audio(message["bytes"])
            except LiveAudioError as exc:
                await _end(gateway, sid, ended)
                await link.close(DATA_ERROR, f"DATA-0000 {exc}")
                return "gone"
            for number, data in chunks:
                record = ClientPublish(topic=f"{audio_chunk_prefix(sid)}/{number}", payload=data)
                await bus.produce(AUDIO_TOPIC, sid, record.encode())
            continue
        control, answers = connection.control(message.get("text") or "")
        await link.send(answers)
        if control == "finalize":
            await _control(gateway, sid, StreamControl.FLUSH)
        if control == "close":
            await _end(gateway, sid, ended)
            return "closed"


async def _follow(
    gateway: Gateway, link: _Link, connection: LiveConnection, ended: asyncio.Event
) -> None:
    """Send the session's messages as Deepgram's until it ends; then ``Metadata``, and close."""
    sid = connection.sid
    loop = asyncio.get_running_loop()
    deadline = None
    async for step in follow.follow(gateway.ctx.store, sid, poll_s=POLL_S):
        for message in step.messages:
            await link.send(connection.translate(message))
        if step.session is not None and step.terminal:
            session = step.session
            break
        if ended.is_set():
            deadline = deadline or loop.time() + FINISH_S
            if loop.time() > deadline:
                await link.close(SERVER_ERROR, f"the stream did not finish in {FINISH_S:.0f} s")
                return
    if session.status is SessionStatus.FAILED:
        await link.close(SERVER_ERROR, f"session {sid} failed: {session.error_message or ''}")
        return
    await link.send([connection.metadata()])
    await link.close(1000, "")


async def _end(gateway: Gateway, sid: str, ended: asyncio.Event | None = None) -> None:
    """End the stream (once): the worker finishes its last utterance."""
    if ended is not None and ended.is_set():
        return
    await _control(gateway, sid, StreamControl.END)
    if ended is not None:
        ended.set()


async def _control(gateway: Gateway, sid: str, control: StreamControl) -> None:
    """Send the stream's worker a control message, in line with its audio."""
    record = ClientPublish(topic=audio_control_topic(sid), payload=control.payload)
    await gateway.ctx.bus.produce(AUDIO_TOPIC, sid, record.encode())
