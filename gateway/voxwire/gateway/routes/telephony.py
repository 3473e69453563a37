"""Telephony media streams: ``GET /v1/telephony/media-stream`` (a WebSocket) takes
a call as a telephony platform streams it (Twilio Media Streams' protocol:
:mod:`voxwire.gateway.media_stream`) and makes it a live stream, session
``call-<CallSid>``, whose results go out over MQTT as any stream's do.

The platform cannot set headers on the connection: the API key comes in the
URL (``?key=...``; ``Authorization: Bearer`` or ``X-API-Key`` also do), or as
the stream's custom parameter ``key`` (then checked when ``start`` comes). A
missing or wrong key, a message the protocol has not, or audio in another
format closes the connection with code 1008 and the reason; a call that sends
nothing for ``idle_s`` (60 s) is ended, as a ``stop`` ends it, and so is one
whose connection drops.
"""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from voxwire.access.keys import KeyGrant
from voxwire.core.errors import VoxwireError
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
"""A call that sends nothing for this long is ended."""

POLICY_VIOLATION = 1008

_NO_KEY = "missing or invalid API key: add ?key=<key> or a custom parameter key"


@router.websocket("/v1/telephony/media-stream")
async def media_stream(websocket: WebSocket, key: str | None = None) -> None:
    """A telephony platform's media stream of one call (see the module docstring)."""
    gateway: Gateway = websocket.app.state.gateway
    await websocket.accept()
    credential = key or _header_key(websocket)
    caller = await _caller(gateway, credential) if credential else None
    if credential and caller is None:
        await _close(websocket, POLICY_VIOLATION, _NO_KEY)
        return
    call = MediaStreamCall(track=websocket.query_params.get("track", "inbound"))
    try:
        while not call.ended:
            try:
                message = await asyncio.wait_for(websocket.receive(), IDLE_S)
            except TimeoutError:
                await _perform(gateway, caller, call, call.end())
                await _close(websocket, 1000, f"nothing for {IDLE_S:g} s: the stream has ended")
                return
            if message["type"] == "websocket.disconnect":
                await _perform(gateway, caller, call, call.end())
                return
            text = message.get("text") or message.get("bytes") or b""
            actions = call.receive(text)
            opening = next((a for a in actions if isinstance(a, OpenStream)), None)
            if caller is None and opening is not None:
                caller = await _caller(gateway, opening.key) if opening.key else None
            if caller is None and actions:  # no key in the URL, nor in the start's parameters
                call.ended = True
                await _close(websocket, POLICY_VIOLATION, _NO_KEY)
                return
            await _perform(gateway, caller, call, actions)
    except (MediaStreamError, VoxwireError) as exc:
        await _perform(gateway, caller, call, call.end())
        reason = exc.message if isinstance(exc, VoxwireError) else str(exc)
        await _close(websocket, POLICY_VIOLATION, reason[:120])
        return
    await _close(websocket, 1000, "the call's stream has ended")


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    """Close the connection, unless the platform has already."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.close(code, reason)


async def _perform(
    gateway: Gateway,
    caller: tuple[Tenant, KeyGrant] | None,
    call: MediaStreamCall,
    actions: list[Action],
) -> None:
    """Do what the call asks; nothing before a caller is known (no stream is open)."""
    if caller is None:
        return
    bus = gateway.ctx.bus
    for action in actions:
        if isinstance(action, OpenStream):
            tenant, grant = caller
            await gateway.streams.start(tenant, action.request, sid=action.sid, key=grant)
        elif isinstance(action, Audio):
            assert call.sid is not None
            topic = f"{audio_chunk_prefix(call.sid)}/{action.chunk}"
            record = ClientPublish(topic=topic, payload=action.data)
            await bus.produce(AUDIO_TOPIC, call.sid, record.encode())
        elif isinstance(action, EndStream):
            assert call.sid is not None
            end = ClientPublish(topic=audio_control_topic(call.sid), payload=b'{"type": "end"}')
            await bus.produce(AUDIO_TOPIC, call.sid, end.encode())


async def _caller(gateway: Gateway, credential: str | None) -> tuple[Tenant, KeyGrant] | None:
    store = gateway.ctx.store
    grant = await store.key_grant(credential) if credential else None
    tenant = await store.get_tenant(grant.tenant_id) if grant else None
    return None if grant is None or tenant is None else (tenant, grant)


def _header_key(websocket: WebSocket) -> str | None:
    header = websocket.headers.get("authorization", "")
    found = header[7:].strip() if header.lower().startswith("bearer ") else None
    return found or websocket.headers.get("x-api-key") or None
