"""A session's routes: list, status, transcript (any kept version, in any export
format), messages, audio, and re-transcription. A session's own routes take its
API key or a session token naming it (:data:`~voxwire.gateway.auth.Owned`)."""

from __future__ import annotations

import asyncio
import mimetypes
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from voxwire.gateway.auth import Caller, Owned, session_of
from voxwire.gateway.context import GatewayDep
from voxwire.sessions.retranscribe import archived_wav
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


@router.get("/v1/sessions/{sid}/audio", response_class=Response)
async def get_audio(session: Owned, gateway: GatewayDep) -> Response:
    """The uploaded file as it came, else (a live stream) its archived audio as WAV."""
    blobs = gateway.ctx.blobs
    key = blobs.find(session.sid, "original.")
    if key is None:
        return Response(await archived_wav(blobs, session.sid), media_type="audio/wav")
    data = await asyncio.to_thread(blobs.get, key)
    media = mimetypes.guess_type(key)[0] or "application/octet-stream"
    return Response(content=data, media_type=media)
