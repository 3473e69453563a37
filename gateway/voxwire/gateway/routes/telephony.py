"""Telephony media streams: ``GET /v1/telephony/media-stream`` (a WebSocket) takes
a call as a telephony platform streams it (Twilio Media Streams' protocol:
:mod:`voxwire.gateway.media_stream`) and makes it a live stream, session
``call-<CallSid>``, whose results go out over MQTT as any stream's do. A call
streamed with both tracks is a stream with separate channels: ``customer``
(inbound) and ``agent`` (outbound).

The platform cannot set headers on the connection: the API key comes in the
URL (``?key=...``; ``Authorization: Bearer`` or ``X-API-Key`` also do), or as
the stream's custom parameter ``key`` (then checked when ``start`` comes). A
missing or wrong key, a message the protocol has not, or audio in another
format closes the connection with code 1008 and the reason.

How a call ends, its finals kept in every case:

- ``stop``: at once;
- nothing received for ``idle_s`` (:data:`IDLE_S`, or ``?idle_s=`` on the URL):
  ended, the connection closed with code 1000 and the reason;
- the connection drops without ``stop``: the call is held for ``reconnect_s``
  (:data:`RECONNECT_S`, or ``?reconnect_s=``); a new connection of the same
  call (a ``start`` with the same ``callSid``, the same tracks) within it goes
  on with the same session (:mod:`voxwire.gateway.calls`); after it, ended;
- a ``start`` for a call whose session has ended, is streamed by another
  connection, or was opened by another gateway process: refused (1008, the
  reason), nothing of the session changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect

from voxwire.access.keys import KeyGrant
from voxwire.core.errors import VoxwireError
from voxwire.gateway.calls import CallRefused, CallRegistry, HeldCall
from voxwire.gateway.context import Gateway
from voxwire.gateway.media_stream import (
    Action,
    Audio,
    EndStream,
    MediaStreamCall,
    MediaStreamError,
    OpenStream,
)
from voxwire.store import Tenant
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.topics import audio_chunk_prefix, audio_control_topic

router = APIRouter(tags=["telephony"])

IDLE_S = 60.0
"""A call that sends nothing for this long is ended (``?idle_s=`` changes it)."""
RECONNECT_S = 10.0
"""How long a call whose connection dropped waits for a reconnection (``?reconnect_s=``)."""

POLICY_VIOLATION = 1008

_NO_KEY = "missing or invalid API key: add ?key=<key> or a custom parameter key"


class _Connection:
    """One WebSocket of a call: the protocol's state and the call it streams."""

    def __init__(self, gateway: Gateway, calls: CallRegistry, track: str | None) -> None:
        self.gateway, self.calls = gateway, calls
        self.call = MediaStreamCall(track=track)
        self.caller: tuple[Tenant, KeyGrant] | None = None
        self.held: HeldCall | None = None

    async def perform(self, actions: list[Action]) -> None:
        """Do what the call asks; nothing before a caller is known (no stream is open)."""
        if self.caller is None:
            return
        bus = self.gateway.ctx.bus
        for action in actions:
            if isinstance(action, OpenStream):
                self.held = await self._open(action, *self.caller)
            elif isinstance(action, Audio) and self.held is not None:
                topic = f"{audio_chunk_prefix(self.held.sid)}/{action.chunk}"
                record = ClientPublish(topic=topic, payload=action.data)
                await bus.produce(AUDIO_TOPIC, self.held.sid, record.encode())
                self.held.next_chunk = action.chunk + 1
            elif isinstance(action, EndStream) and self.held is not None:
                self.calls.close(self.held)
                await _end_stream(self.gateway, self.held.sid)

    async def _open(self, action: OpenStream, tenant: Tenant, grant: KeyGrant) -> HeldCall:
        """The call's stream: a new session, or the one a dropped connection left."""
        labels = action.request.channel_labels
        try:
            if self.calls.get(action.sid) is not None:
                held = self.calls.reconnect(action.sid, tenant.id, labels)
                self.call.go_on_from(held.next_chunk)
                return held
            if await self.gateway.ctx.store.get_session(action.sid) is not None:
                raise CallRefused(
                    f"the call's session {action.sid} has ended or is streamed through "
                    "another gateway: a reconnection must reach the same gateway within "
                    "reconnect_s of the drop"
                )
        except CallRefused as exc:
            self.call.ended = True  # the session is not this connection's to end
            raise MediaStreamError(str(exc)) from exc
        await self.gateway.streams.start(tenant, action.request, sid=action.sid, key=grant)
        return self.calls.open(action.sid, tenant.id, labels)

    async def dropped(self, reconnect_s: float) -> None:
        """The connection closed without ``stop``: its audio out, the call held."""
        await self.perform(self.call.detach())
        if self.held is not None and self.held.connected:
            sid = self.held.sid
            self.calls.dropped(self.held, reconnect_s, lambda: _end_stream(self.gateway, sid))


@router.websocket("/v1/telephony/media-stream")
async def media_stream(
    websocket: WebSocket,
    key: str | None = None,
    idle_s: Annotated[float, Query(ge=1, le=3600)] = IDLE_S,
    reconnect_s: Annotated[float, Query(ge=0, le=600)] = RECONNECT_S,
) -> None:
    """A telephony platform's media stream of one call (see the module docstring)."""
    gateway: Gateway = websocket.app.state.gateway
    await websocket.accept()
    credential = key or _header_key(websocket)
    connection = _Connection(gateway, _registry(websocket), websocket.query_params.get("track"))
    connection.caller = await _caller(gateway, credential) if credential else None
    if credential and connection.caller is None:
        await _close(websocket, POLICY_VIOLATION, _NO_KEY)
        return
    call = connection.call
    try:
        while not call.ended:
            try:
                message = await asyncio.wait_for(websocket.receive(), idle_s)
            except TimeoutError:
                await connection.perform(call.end())
                await _close(websocket, 1000, f"nothing for {idle_s:g} s: the stream has ended")
                return
            if message["type"] == "websocket.disconnect":
                await connection.dropped(reconnect_s)
                return
            text = message.get("text") or message.get("bytes") or b""
            actions = call.receive(text)
            opening = next((a for a in actions if isinstance(a, OpenStream)), None)
            if connection.caller is None and opening is not None and opening.key:
                connection.caller = await _caller(gateway, opening.key)
            if connection.caller is None and actions:  # no key in the URL, nor in the start's
                call.ended = True
                await _close(websocket, POLICY_VIOLATION, _NO_KEY)
                return
            await connection.perform(actions)
    except (MediaStreamError, VoxwireError) as exc:
        await connection.perform(call.end())
        reason = exc.message if isinstance(exc, VoxwireError) else str(exc)
        await _close(websocket, POLICY_VIOLATION, reason[:120])
        return
    await _close(websocket, 1000, "the call's stream has ended")


def _registry(websocket: WebSocket) -> CallRegistry:
    """This process's held calls (one registry per app)."""
    state = websocket.app.state
    if getattr(state, "telephony_calls", None) is None:
        state.telephony_calls = CallRegistry()
    registry: CallRegistry = state.telephony_calls
    return registry


async def _end_stream(gateway: Gateway, sid: str) -> None:
    end = ClientPublish(topic=audio_control_topic(sid), payload=b'{"type": "end"}')
    await gateway.ctx.bus.produce(AUDIO_TOPIC, sid, end.encode())


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    """Close the connection, unless the platform has already."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.close(code, reason)


async def _caller(gateway: Gateway, credential: str | None) -> tuple[Tenant, KeyGrant] | None:
    store = gateway.ctx.store
    grant = await store.key_grant(credential) if credential else None
    tenant = await store.get_tenant(grant.tenant_id) if grant else None
    return None if grant is None or tenant is None else (tenant, grant)


def _header_key(websocket: WebSocket) -> str | None:
    header = websocket.headers.get("authorization", "")
    found = header[7:].strip() if header.lower().startswith("bearer ") else None
    return found or websocket.headers.get("x-api-key") or None
