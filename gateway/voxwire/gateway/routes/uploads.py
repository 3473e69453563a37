"""``POST /v1/sessions``: an uploaded audio file becomes a session.

The route reads its multipart body itself, within ``max_upload_mb``
(:func:`is_upload` exempts it from the gateway's body limit), and
:class:`~voxwire.gateway.forms.UploadForm` parses the form's fields into the
session's options.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile

from voxwire.gateway.auth import AnyKey
from voxwire.gateway.context import GatewayDep
from voxwire.gateway.forms import UploadForm
from voxwire.sessions.uploads import Upload, UploadService
from voxwire.sessions.views import endpoints, session_info
from voxwire_client.api import ErrorBody, SessionCreated

router = APIRouter(tags=["sessions"])


@router.post(
    "/v1/sessions",
    status_code=201,
    response_model=SessionCreated,
    responses={
        400: {"model": ErrorBody},
        401: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody},
    },
)
async def create_session(
    request: Request,
    caller: AnyKey,
    gateway: GatewayDep,
    file: Annotated[UploadFile, File(description="audio: WAV, FLAC, MP3, OGG/Opus, M4A")],
    prompts: Annotated[str | None, Form(description="JSON list of phrases to listen for")] = None,
    language: Annotated[
        str | None, Form(description="a language code such as 'de', or 'auto' to detect it")
    ] = None,
    model: Annotated[
        str | None, Form(description="one of the models the platform serves (GET /healthz)")
    ] = None,
    redact: Annotated[
        str | None, Form(description="personal data: off, mask, entity or numbers")
    ] = None,
    diarize: Annotated[
        str | None, Form(description="true: label every segment with its speaker (S1, S2...)")
    ] = None,
    min_speakers: Annotated[
        str | None, Form(description="with diarize: at least this many speakers (1-20)")
    ] = None,
    max_speakers: Annotated[
        str | None, Form(description="with diarize: at most this many speakers (1-20)")
    ] = None,
    vocabulary: Annotated[
        str | None,
        Form(description='words to expect: "ComfyUI, Kubernetes" or a JSON list (at most 50)'),
    ] = None,
    task: Annotated[
        str | None,
        Form(description="transcribe (the default) or translate: the text in English"),
    ] = None,
    keep_original_audio: Annotated[
        str | None,
        Form(description="with redaction: true keeps the audio as recorded too, for the owner"),
    ] = None,
    sample_rate: Annotated[
        int | None,
        Form(description="of a headerless G.711 file (.ul, .al): 8000 (the default) or 16000"),
    ] = None,
    callback: Annotated[
        str | None,
        Form(
            description="an http(s) URL that gets the transcript (signed JSON) once it is stored: "
            "docs/webhooks.md"
        ),
    ] = None,
    channels: Annotated[
        str | None,
        Form(description="mixed (the default): channels averaged; separate: each on its own"),
    ] = None,
    channel_labels: Annotated[
        str | None,
        Form(description='with channels=separate: a label per channel, "agent,customer"'),
    ] = None,
) -> SessionCreated:
    uploads, settings = gateway.uploads, gateway.ctx.settings
    declared = request.headers.get("content-length")
    if declared and declared.isdigit():
        uploads.check_size(int(declared) - 64 * 1024)
    data = await _read_limited(file, uploads)
    form = UploadForm(
        prompts=prompts,
        language=language,
        model=model,
        redact=redact,
        diarize=diarize,
        min_speakers=min_speakers,
        max_speakers=max_speakers,
        vocabulary=vocabulary,
        task=task,
        keep_original_audio=keep_original_audio,
        channels=channels,
        channel_labels=channel_labels,
    )
    upload = Upload(file.filename, data, form.options(), sample_rate, callback=callback)
    session = await uploads.accept(caller[0], upload, key=caller[1])
    return SessionCreated(
        **session_info(session).model_dump(), endpoints=endpoints(settings, session.sid)
    )


def is_upload(scope: MutableMapping[str, Any]) -> bool:
    """The upload reads its body itself, within ``max_upload_mb``."""
    return bool(scope["method"] == "POST" and scope["path"] == "/v1/sessions")


async def _read_limited(file: UploadFile, uploads: UploadService) -> bytes:
    chunks, size = [], 0
    while chunk := await file.read(1 << 20):
        size += len(chunk)
        uploads.check_size(size)
        chunks.append(chunk)
    return b"".join(chunks)
