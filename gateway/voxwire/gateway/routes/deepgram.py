"""Deepgram's pre-recorded listening: ``POST /v1/listen`` (the live WebSocket on
the same path is :mod:`voxwire.gateway.routes.deepgram_live`).

The body is the audio (any ``Content-Type`` but JSON: a file in any format an
upload takes, or raw linear16/mulaw/alaw as ``encoding``, ``sample_rate`` and
``channels`` declare it). A JSON body asks for a URL to be fetched, which this
server refuses with Deepgram's 400: a gateway that fetches what a caller names
reaches whatever the gateway can reach (a server-side request forgery), so the
audio must come in the body. The request is an ordinary upload
(:class:`~voxwire.sessions.uploads.UploadService`): a stored session, searchable
and published over MQTT like any other; the request waits for its transcript
and answers in Deepgram's shape (:mod:`voxwire.gateway.deepgram_api.prerecorded`),
the session's id as ``metadata.request_id`` and in ``X-Voxwire-Session``. With a
``callback`` URL it answers at once with ``{"request_id": <sid>}``, as Deepgram
does, and the transcript is POSTed to the URL once stored, as any upload's
webhook (:mod:`voxwire.sessions.webhooks`: voxwire's signed event, not
Deepgram's body). Errors are Deepgram's (:mod:`voxwire.gateway.deepgram_api.errors`).
"""

from __future__ import annotations

import hashlib
import mimetypes
import struct
from collections.abc import MutableMapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from voxwire.core.errors import VoxwireError
from voxwire.gateway.context import Gateway, GatewayDep
from voxwire.gateway.deepgram_api.callers import caller, header_credential
from voxwire.gateway.deepgram_api.errors import (
    REQUEST_ID_HEADER,
    DeepgramError,
    error_response,
    from_voxwire,
    unsupported,
)
from voxwire.gateway.deepgram_api.params import DeepgramRequest, RawAudio, file_request
from voxwire.gateway.deepgram_api.prerecorded import file_response
from voxwire.sessions import follow
from voxwire.sessions.languages import choose
from voxwire.sessions.uploads import Upload
from voxwire.sessions.views import transcript_of
from voxwire.store import SessionRecord, Store
from voxwire_client.encodings import SAMPLE_BYTES, AudioEncoding
from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.messages import SessionStatus

router = APIRouter(tags=["deepgram"])

SESSION_HEADER = "X-Voxwire-Session"
PATH = "/v1/listen"
MAX_WAIT_S = 3600.0
"""The longest a request waits for its transcript (longer: a 504; the session goes on)."""

_WAV_TAGS = {AudioEncoding.PCM16: 1, AudioEncoding.ALAW: 6, AudioEncoding.MULAW: 7}
CALLBACKS_REFUSED = (
    "a live stream's results come on the connection (and over MQTT); callbacks are for "
    "pre-recorded requests"
)


def is_deepgram_upload(scope: MutableMapping[str, Any]) -> bool:
    """This route reads its body within ``max_upload_mb``, as the upload does."""
    return bool(scope.get("type") == "http" and scope["method"] == "POST" and scope["path"] == PATH)


@router.post(PATH, responses={400: {}, 401: {}, 413: {}, 429: {}, 500: {}, 503: {}})
async def listen_file(request: Request, gateway: GatewayDep) -> Response:
    """Transcribe the audio in the body (Deepgram's pre-recorded API)."""
    sid: str | None = None
    try:
        tenant, key = await caller(gateway, header_credential(request.headers))
        asked = file_request(request.query_params.multi_items(), gateway.ctx.settings)
        if asked.callback is not None:  # checked before the audio is read
            await gateway.uploads.webhooks.check(asked.callback, key)
        data, name = await _audio(request, gateway, asked)
        options = asked.options
        upload = Upload(name, data, options, callback=asked.callback)
        session = await gateway.uploads.accept(tenant, upload, key=key)
        sid = session.sid
        if asked.callback is not None:  # Deepgram's answer to a request with a callback
            return JSONResponse({"request_id": sid}, headers=_headers(sid))
        done = await _finished(gateway.ctx.store, sid)
        transcript = await transcript_of(gateway.ctx.store, done)
    except DeepgramError as exc:
        return error_response(exc, sid)
    except (VoxwireError, InvalidSessionIdError) as exc:
        return error_response(from_voxwire(exc), sid or getattr(exc, "sid", None))
    settings = gateway.ctx.settings
    served = choose(settings, model=options.model, task=options.task, language=options.language)
    body = file_response(
        transcript, asked.listening, model=served.model, sha256=hashlib.sha256(data).hexdigest()
    )
    return JSONResponse(body.model_dump(exclude_none=True, mode="json"), headers=_headers(sid))


def _headers(sid: str) -> dict[str, str]:
    return {SESSION_HEADER: sid, REQUEST_ID_HEADER: sid}


async def _audio(request: Request, gateway: Gateway, asked: DeepgramRequest) -> tuple[bytes, str]:
    """The body's audio and a file name for it (raw audio: wrapped in a WAV header)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        raise unsupported(
            "a URL to fetch",
            "this server does not fetch audio from URLs (it would reach whatever the server "
            "can reach); send the audio itself as the body, with Content-Type audio/*",
        )
    uploads = gateway.uploads
    declared = request.headers.get("content-length")
    if declared and declared.isdigit():
        uploads.check_size(int(declared) - 64 * 1024)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        uploads.check_size(size)
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise DeepgramError(400, "Bad Request: the body is empty: send the audio as the body")
    if asked.raw is not None and data[:4] != b"RIFF":
        return wav(data, asked.raw), "listen.wav"
    return data, f"listen{mimetypes.guess_extension(kind) or ''}"


def wav(data: bytes, raw: RawAudio) -> bytes:
    """Raw samples as a WAV file of their encoding, rate and channels."""
    width = SAMPLE_BYTES[raw.encoding]
    data = data[: len(data) - len(data) % (width * raw.channels)]
    fmt = struct.pack(
        "<HHIIHH",
        _WAV_TAGS[raw.encoding],
        raw.channels,
        raw.sample_rate,
        raw.sample_rate * width * raw.channels,
        width * raw.channels,
        8 * width,
    )
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data))
    return b"RIFF" + struct.pack("<I", 4 + len(chunks) + len(data)) + b"WAVE" + chunks + data


async def _finished(store: Store, sid: str) -> SessionRecord:
    """The session once it has completed; DeepgramError when it failed or ran too long."""
    session = await follow.finished(store, sid, max_wait_s=MAX_WAIT_S)
    if session is None:
        raise DeepgramError(
            504,
            f"session {sid} is still running after {MAX_WAIT_S:.0f} s; fetch its "
            f"transcript later from /v1/sessions/{sid}/transcript",
            "TIMEOUT",
        )
    if session.status is SessionStatus.FAILED:
        reason = session.error_message or "no reason given"
        raise DeepgramError(500, f"session {sid} failed: {reason}", "INTERNAL_SERVER_ERROR")
    return session
