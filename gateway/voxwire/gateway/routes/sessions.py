"""A session's routes: list, status, transcript (any kept version, in any export
format), messages, audio, re-transcription, and deletion. A session's own routes
take its API key or a session token naming it (:data:`~voxwire.gateway.auth.Owned`);
deleting it takes its owner's API key."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from voxwire.core.errors import ForbiddenError
from voxwire.gateway.auth import (
    AnyKey,
    Caller,
    Owned,
    is_session_token,
    session_of,
    state_of,
)
from voxwire.gateway.context import GatewayDep
from voxwire.sessions.audio import original_audio, served_audio
from voxwire.sessions.deletion import Actor, Reason
from voxwire.sessions.views import session_info, transcript_of
from voxwire.text.exports import CONTENT_TYPES, TEXT_FORMATS, render, transcript_format
from voxwire_client.api import (
    ErrorBody,
    MessagesPage,
    SessionInfo,
    TranscriptFormat,
    TranscriptResponse,
)
from voxwire_client.versions import RetranscribeAccepted, RetranscribeRequest

router = APIRouter(tags=["sessions"])


@router.get("/v1/sessions", response_model=list[SessionInfo])
async def list_sessions(
    caller: Caller, gateway: GatewayDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[SessionInfo]:
    return [session_info(s) for s in await gateway.ctx.store.list_sessions(caller.id, limit)]


@router.get("/v1/sessions/{sid}", response_model=SessionInfo)
async def get_session(session: Owned) -> SessionInfo:
    return session_info(session)


@router.get(
    "/v1/sessions/{sid}/transcript",
    response_model=TranscriptResponse,
    responses={
        200: {"content": {CONTENT_TYPES[f].split(";")[0]: {} for f in TEXT_FORMATS}},
        400: {"model": ErrorBody},
    },
)
async def get_transcript(
    session: Owned,
    gateway: GatewayDep,
    format: Annotated[str, Query(description="json (default), txt, srt or vtt")] = "json",
    version: Annotated[int | None, Query(ge=1, description="a kept version")] = None,
) -> TranscriptResponse | Response:
    """The transcript: JSON, or as plain text (``txt``) or subtitles (``srt``,
    ``vtt``) with speaker labels where the segments have them; the current
    version, or an earlier one that a re-transcription replaced."""
    fmt = transcript_format(format)
    transcript = await transcript_of(gateway.ctx.store, session, version)
    if fmt is not TranscriptFormat.JSON:
        return Response(
            render(list(transcript.segments), fmt),
            media_type=CONTENT_TYPES[fmt],
            headers={"content-disposition": f'attachment; filename="{session.sid}.{fmt}"'},
        )
    return transcript


@router.post(
    "/v1/sessions/{sid}/retranscribe",
    status_code=202,
    response_model=RetranscribeAccepted,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def retranscribe(
    caller: Caller, sid: str, request: RetranscribeRequest, gateway: GatewayDep
) -> RetranscribeAccepted:
    """Transcribe the session's stored audio again, as its next transcript version."""
    session = await session_of(gateway, sid, caller.id)
    return await gateway.retranscribe.start(session, caller.name, request)


@router.get("/v1/sessions/{sid}/messages", response_model=MessagesPage)
async def get_messages(
    session: Owned,
    gateway: GatewayDep,
    after: Annotated[int, Query(ge=0, description="return messages with seq > after")] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> MessagesPage:
    messages = await gateway.ctx.store.messages_after(session.sid, after, limit)
    return MessagesPage(sid=session.sid, messages=messages, last_seq=session.last_seq)


@router.get(
    "/v1/sessions/{sid}/audio",
    response_class=Response,
    responses={403: {"model": ErrorBody}, 404: {"model": ErrorBody}},
)
async def get_audio(
    session: Owned,
    gateway: GatewayDep,
    request: Request,
    original: Annotated[
        bool,
        Query(
            description="a redacted session's audio as recorded (keep_original_audio): "
            "for an API key of its tenant, not a session token"
        ),
    ] = False,
) -> Response:
    """The uploaded file as it came, else the stored audio as WAV; a redacted
    session's with the redacted spans silenced (:mod:`voxwire.sessions.audio`)."""
    if original and is_session_token(request):
        raise ForbiddenError(
            "a session's original audio is for its owner: a session token cannot fetch it",
            hint="ask with the API key that owns the session",
            sid=session.sid,
        )
    fetch = original_audio if original else served_audio
    audio = await asyncio.to_thread(fetch, gateway.ctx.blobs, session.sid)
    return Response(content=audio.data, media_type=audio.media_type)


@router.delete(
    "/v1/sessions/{sid}",
    status_code=204,
    response_class=Response,
    responses={404: {"model": ErrorBody}},
)
async def delete_session(sid: str, caller: AnyKey, gateway: GatewayDep) -> Response:
    """Delete the session everywhere: its audio, every transcript version, its
    messages, matches and search entries, its live checkpoint and its retained
    MQTT messages; a live stream is ended first. Asking again answers 204 too;
    the session answers 404 everywhere else from now on. Needs the API key of
    its tenant (a device key: one that opened it)."""
    tenant, key = caller
    state = await state_of(gateway, sid, tenant, key)
    await gateway.eraser.delete(state, Actor(tenant.id, key.key_id), Reason.REQUEST)
    return Response(status_code=204)
