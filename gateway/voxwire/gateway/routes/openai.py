"""OpenAI's audio API: ``POST /v1/audio/transcriptions`` and
``/v1/audio/translations`` (multipart, as OpenAI's reference defines them), and
``GET /v1/models``, with the API key as the bearer token.

Each transcription is an ordinary upload (:class:`~voxwire.sessions.uploads.UploadService`):
a stored session, searchable and published over MQTT like any other; the request
waits for its transcript and answers with it in the ``response_format`` asked
for, or (``stream=true``) streams its final segments as server-sent events. The
answer names the session in ``X-Voxwire-Session``. Errors on these routes are
OpenAI's (:mod:`voxwire.gateway.openai_api.errors`): :class:`OpenAIRoute`
translates them, authentication and form errors included.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Coroutine, MutableMapping
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute

from voxwire.gateway.auth import AnyKey
from voxwire.gateway.context import GatewayDep
from voxwire.gateway.openai_api.errors import (
    ANSWERED,
    OpenAIError,
    error_response,
    model_not_found,
)
from voxwire.gateway.openai_api.follow import finished, text_events
from voxwire.gateway.openai_api.form import OpenAIForm, OpenAIRequest
from voxwire.gateway.openai_api.shapes import ErrorResponse, ModelCard, ModelList, rendered
from voxwire.sessions.languages import served_models
from voxwire.sessions.uploads import Upload, UploadService
from voxwire.sessions.views import transcript_of
from voxwire.store import Store
from voxwire_client.messages import Task

SESSION_HEADER = "X-Voxwire-Session"
PATHS = ("/v1/audio/transcriptions", "/v1/audio/translations")
_STARTED = int(time.time())


class OpenAIRoute(APIRoute):
    """A route whose errors (its dependencies' too) are OpenAI's error bodies."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except ANSWERED as exc:
                return error_response(exc)

        return answer


router = APIRouter(tags=["openai"], route_class=OpenAIRoute)
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (400, 401, 404, 413, 429, 500, 503)
}

File_ = Annotated[UploadFile, File(description="audio: WAV, FLAC, MP3, OGG/Opus, M4A, WebM")]
Model = Annotated[
    str, Form(description="a served model, or whisper-1 / gpt-4o(-mini)-transcribe: the default")
]
Prompt = Annotated[str | None, Form(description="words to expect; prompts the decoder")]
Format = Annotated[str | None, Form(description="json (default), text, srt, verbose_json, vtt")]
Temperature = Annotated[str | None, Form(description="accepted (0 to 1) and ignored")]
Callback = Annotated[
    str | None,
    Form(description="voxwire's own: an http(s) URL that gets the transcript once stored"),
]


@router.post("/v1/audio/transcriptions", responses=_ERRORS)
async def create_transcription(
    request: Request,
    caller: AnyKey,
    gateway: GatewayDep,
    file: File_,
    model: Model,
    language: Annotated[str | None, Form(description="ISO-639-1 code, or auto")] = None,
    prompt: Prompt = None,
    response_format: Format = None,
    temperature: Temperature = None,
    timestamp_granularities: Annotated[
        list[str] | None,
        Form(alias="timestamp_granularities[]", description="word, segment (verbose_json)"),
    ] = None,
    stream: Annotated[str | None, Form(description="true: server-sent text events")] = None,
    callback: Callback = None,
) -> Response:
    """Transcribe audio into the language spoken."""
    form = OpenAIForm(
        model,
        language,
        prompt,
        response_format,
        temperature,
        tuple(timestamp_granularities or ()),
        stream,
        callback,
    )
    asked = form.request(gateway.ctx.settings, Task.TRANSCRIBE)
    return await _answer(request, caller, gateway, file, asked)


@router.post("/v1/audio/translations", responses=_ERRORS)
async def create_translation(
    request: Request,
    caller: AnyKey,
    gateway: GatewayDep,
    file: File_,
    model: Model,
    prompt: Prompt = None,
    response_format: Format = None,
    temperature: Temperature = None,
    callback: Callback = None,
) -> Response:
    """Translate audio into English (a multilingual model; the language spoken is detected)."""
    form = OpenAIForm(model, None, prompt, response_format, temperature, callback=callback)
    asked = form.request(gateway.ctx.settings, Task.TRANSLATE)
    return await _answer(request, caller, gateway, file, asked)


@router.get("/v1/models", response_model=ModelList, responses=_ERRORS)
async def list_models(_caller: AnyKey, gateway: GatewayDep) -> ModelList:
    """The models the platform serves, the default first."""
    return ModelList(data=[_card(name) for name in served_models(gateway.ctx.settings)])


@router.get("/v1/models/{model}", response_model=ModelCard, responses=_ERRORS)
async def get_model(model: str, _caller: AnyKey, gateway: GatewayDep) -> ModelCard:
    served = served_models(gateway.ctx.settings)
    if model not in served:
        raise model_not_found(model, served)
    return _card(model)


def is_openai_upload(scope: MutableMapping[str, Any]) -> bool:
    """These routes read their file within ``max_upload_mb``, as the upload does."""
    return bool(scope["method"] == "POST" and scope["path"] in PATHS)


def _card(name: str) -> ModelCard:
    return ModelCard(id=name, created=_STARTED, owned_by="voxwire")


async def _answer(
    request: Request, caller: AnyKey, gateway: GatewayDep, file: UploadFile, asked: OpenAIRequest
) -> Response:
    """The file as a session; its transcript once it is done, or its text as it comes."""
    uploads = gateway.uploads
    declared = request.headers.get("content-length")
    if declared and declared.isdigit():
        uploads.check_size(int(declared) - 64 * 1024)
    data = await _read_limited(file, uploads)
    tenant, key = caller
    upload = Upload(file.filename, data, asked.options, callback=asked.callback)
    session = await uploads.accept(tenant, upload, key=key)
    store, headers = gateway.ctx.store, {SESSION_HEADER: session.sid}
    if asked.stream:
        return StreamingResponse(
            _events(store, session.sid), media_type="text/event-stream", headers=headers
        )
    transcript = await transcript_of(store, await finished(store, session.sid))
    body = rendered(transcript, asked.fmt, asked.granularities, asked.temperature)
    if isinstance(body, tuple):
        return Response(body[0], media_type=body[1], headers=headers)
    return JSONResponse(body.model_dump(exclude_none=True), headers=headers)


async def _events(store: Store, sid: str) -> AsyncIterator[str]:
    """Server-sent events: the text deltas and the done event, or an error."""
    try:
        async for event in text_events(store, sid):
            yield f"data: {event.model_dump_json()}\n\n"
    except OpenAIError as exc:
        yield f"data: {ErrorResponse(error=exc.detail).model_dump_json()}\n\n"


async def _read_limited(file: UploadFile, uploads: UploadService) -> bytes:
    chunks, size = [], 0
    while chunk := await file.read(1 << 20):
        size += len(chunk)
        uploads.check_size(size)
        chunks.append(chunk)
    return b"".join(chunks)
