"""The HTTP gateway (FastAPI): upload, session status, transcripts, history, search, health,
and the web app (``/app/``).

``/healthz`` (alive), ``/readyz`` (every dependency answers: 200, else 503 with a reason
for each; :mod:`voxwire.core.readiness`) and ``/metrics`` need no key. Every other API route
needs an API key: ``Authorization: Bearer
<key>`` or ``X-API-Key: <key>``. The routes of one session (``/v1/sessions/{sid}...``) also
take a session token from ``POST /v1/tokens`` that names it. A device key
(:data:`~voxwire.access.keys.KeyRole`) may only open sessions (``POST /v1/streams``,
``POST /v1/sessions``) and use the routes of the sessions it opened; anything else
answers 403. Errors are JSON bodies of :class:`ErrorBody`.
"""

import asyncio
import logging
import math
import mimetypes
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Annotated, Any

from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from voxwire.access.control import AccessControl, NoAccessSync
from voxwire.access.keys import KeyGrant, device_refusal
from voxwire.access.rules import key_principal, owns
from voxwire.access.tokens import TokenIssuer, issuer_for, looks_like_token
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import (
    AudioError,
    AudioTooLongError,
    AuthError,
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    VoxwireError,
)
from voxwire.core.metrics import ERRORS, RATE_LIMITED
from voxwire.core.ratelimit import RateLimitedError, RateLimits
from voxwire.core.readiness import (
    HEALTH_PATH,
    METRICS_PATH,
    READY_PATH,
    Readiness,
    ReadinessReport,
)
from voxwire.gateway.body_limit import BodyLimit
from voxwire.gateway.emqx import emqx_hooks
from voxwire.gateway.request_metrics import RequestMetrics
from voxwire.gateway.web import mount_web_app
from voxwire.search import SearchIndex, SearchQueryError
from voxwire.sessions.languages import served_models
from voxwire.sessions.pools import NoWorkerError, PoolCheck
from voxwire.sessions.retranscribe import RetranscribeService, archived_wav
from voxwire.sessions.streams import StreamService
from voxwire.sessions.uploads import Upload, UploadService
from voxwire.sessions.views import endpoints, session_info, stream_created, transcript_of
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.text.exports import CONTENT_TYPES, TEXT_FORMATS, render, transcript_format
from voxwire_client.api import (
    ErrorBody,
    Health,
    MessagesPage,
    PromptChange,
    SearchPage,
    SearchQuery,
    SessionCreated,
    SessionInfo,
    StreamCreated,
    StreamRequest,
    TokenRequest,
    TokenResponse,
    TranscriptFormat,
    TranscriptResponse,
)
from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.topics import (
    validate_sid,
)
from voxwire_client.versions import RetranscribeAccepted, RetranscribeRequest

log = logging.getLogger(__name__)

_STATUS = {
    AuthError: 401,
    ForbiddenError: 403,
    RateLimitedError: 429,
    NotFoundError: 404,
    ConflictError: 409,
    InvalidRequestError: 400,
    PayloadTooLargeError: 413,
    SearchQueryError: 400,
    AudioTooLongError: 413,
    AudioError: 422,
    NoWorkerError: 503,
}


@dataclass(frozen=True, slots=True)
class GatewayContext:
    settings: Settings
    store: Store
    bus: Bus
    blobs: BlobStore
    workers: int
    search: SearchIndex
    access: AccessControl = field(default_factory=NoAccessSync)
    tokens: TokenIssuer | None = None
    """Signs browser session tokens; None: the settings' issuer."""
    device: str | None = None
    """Where this process's engines run (``cuda:0 (NVIDIA H200)``, ``cpu``); None: elsewhere."""
    readiness: Readiness = field(default_factory=Readiness)
    """What ``/readyz`` asks: the dependencies of this process's roles."""
    pools: PoolCheck | None = None
    """Asks whether a worker runs a session's model before it is accepted (None: not asked)."""


def _status_for(exc: VoxwireError) -> int:
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500


def create_app(ctx: GatewayContext) -> FastAPI:
    app = FastAPI(
        title="voxwire gateway",
        version=version("voxwire"),
        description="Upload audio, follow sessions, fetch transcripts. Results are delivered "
        "over MQTT on transcription/<sid>/result|progress|match.",
    )
    uploads = UploadService(ctx.settings, ctx.store, ctx.bus, ctx.blobs, ctx.access, ctx.pools)
    streams = StreamService(ctx.store, ctx.bus, ctx.access, ctx.settings, ctx.pools)
    again = RetranscribeService(ctx.settings, ctx.store, ctx.bus, ctx.blobs, ctx.pools)
    settings = ctx.settings
    limits = RateLimits(settings.limits.rate_limit_per_s, settings.limits.rate_limit_burst)
    tokens = ctx.tokens or issuer_for(
        settings.security.token_secret.get_secret_value(), settings.data_dir
    )

    @app.exception_handler(VoxwireError)
    async def voxwire_error(_request: Request, exc: VoxwireError) -> JSONResponse:
        body = ErrorBody(code=exc.code, message=exc.message, hint=exc.hint, sid=exc.sid)
        ERRORS.labels(code=exc.code).inc()
        headers = None
        if isinstance(exc, RateLimitedError):
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        return JSONResponse(body.model_dump(), status_code=_status_for(exc), headers=headers)

    @app.exception_handler(InvalidSessionIdError)
    async def bad_sid(_request: Request, exc: InvalidSessionIdError) -> JSONResponse:
        body = ErrorBody(code=exc.code, message=exc.message, hint=exc.hint)
        ERRORS.labels(code=exc.code).inc()
        return JSONResponse(body.model_dump(), status_code=400)

    def take(tenant_id: str, name: str) -> None:
        if wait := limits.take(tenant_id):
            RATE_LIMITED.inc()
            raise RateLimitedError(f"too many requests for tenant {name}", retry_after_s=wait)

    async def api_key(request: Request) -> tuple[Tenant, KeyGrant]:
        """The caller's tenant and key, of any role."""
        credential = _credential(request)
        grant = await ctx.store.key_grant(credential) if credential else None
        found = await ctx.store.get_tenant(grant.tenant_id) if grant else None
        if grant is None or found is None:
            raise AuthError(
                "missing or invalid API key",
                hint="send 'Authorization: Bearer <key>'; create a key with `voxwire keys create`",
            )
        take(found.id, found.name)
        return found, grant

    async def tenant(request: Request) -> Tenant:
        """The caller's tenant, for a tenant key (a device key: 403)."""
        found, grant = await api_key(request)
        if grant.device:
            raise device_refusal(f"{request.method} {request.url.path}")
        return found

    Caller = Annotated[Tenant, Depends(tenant)]
    AnyKey = Annotated[tuple[Tenant, KeyGrant], Depends(api_key)]

    async def session_of(sid: str, tenant_id: str, key: KeyGrant | None = None) -> SessionRecord:
        """Session ``sid`` of ``tenant_id`` (with a device ``key``: one it opened)."""
        validate_sid(sid)
        session = await ctx.store.get_session(sid)
        if session is None or session.tenant_id != tenant_id:
            raise NotFoundError(f"no session {sid}", sid=sid)
        if key is not None and not owns(key_principal(key), session.owner):
            raise NotFoundError(
                f"no session {sid} for this device key",
                hint="a device key reaches only the sessions it opened",
                sid=sid,
            )
        return session

    async def session_access(sid: str, request: Request) -> SessionRecord:
        """The session, for its API key's tenant (a device key: a session it opened)
        or for a session token naming it."""
        credential = _credential(request)
        if credential is None or not looks_like_token(credential):
            found, key = await api_key(request)
            return await session_of(sid, found.id, key)
        grant = tokens.verify(credential)
        if sid not in grant.sids:
            raise NotFoundError(f"no session {sid} for this token", sid=sid)
        take(grant.tenant_id, grant.tenant_id)
        return await session_of(sid, grant.tenant_id)

    Owned = Annotated[SessionRecord, Depends(session_access)]

    @app.get(METRICS_PATH, tags=["health"], response_class=Response)
    async def metrics() -> Response:
        """This process's counters, Prometheus text format (no secrets, no session data)."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get(HEALTH_PATH, response_model=Health, tags=["health"])
    async def health() -> Health:
        return Health(
            status="ok",
            version=version("voxwire"),
            mode=settings.mode,
            workers=ctx.workers,
            model=settings.engine.model,
            device=ctx.device,
            models=served_models(settings),
            routes=settings.pools.routes,
        )

    @app.get(READY_PATH, response_model=ReadinessReport, tags=["health"], responses={503: {}})
    async def ready() -> JSONResponse:
        """Whether each dependency answers now; 503 names those that do not."""
        report = await ctx.readiness.report()
        return JSONResponse(report.model_dump(), status_code=report.http_status)

    @app.post(
        "/v1/sessions",
        status_code=201,
        response_model=SessionCreated,
        tags=["sessions"],
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
        file: Annotated[UploadFile, File(description="audio: WAV, FLAC, MP3, OGG/Opus, M4A")],
        prompts: Annotated[
            str | None, Form(description="JSON list of phrases to listen for")
        ] = None,
        language: Annotated[
            str | None, Form(description="a language code such as 'de', or 'auto' to detect it")
        ] = None,
        model: Annotated[
            str | None, Form(description="one of the models the platform serves (GET /healthz)")
        ] = None,
        redact: Annotated[
            str | None, Form(description="personal data: off, mask or entity")
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
    ) -> SessionCreated:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit():
            uploads.check_size(int(declared) - 64 * 1024)
        data = await _read_limited(file, uploads)
        session = await uploads.accept(
            caller[0],
            Upload(
                file.filename,
                data,
                prompts,
                language,
                redact,
                model,
                diarize=diarize,
                min_speakers=min_speakers,
                max_speakers=max_speakers,
                vocabulary=vocabulary,
                task=task,
            ),
            key=caller[1],
        )
        return SessionCreated(
            **session_info(session).model_dump(), endpoints=endpoints(settings, session.sid)
        )

    @app.post(
        "/v1/streams",
        status_code=201,
        response_model=StreamCreated,
        tags=["streams"],
        responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}},
    )
    async def create_stream(caller: AnyKey, request: StreamRequest) -> StreamCreated:
        """Start a live stream; then publish audio chunks over MQTT. Device keys may."""
        tenant_of, key = caller
        session = await streams.start(tenant_of, request, key=key)
        return stream_created(settings, session)

    @app.get("/v1/sessions", response_model=list[SessionInfo], tags=["sessions"])
    async def list_sessions(
        caller: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[SessionInfo]:
        return [session_info(s) for s in await ctx.store.list_sessions(caller.id, limit)]

    @app.get("/v1/sessions/{sid}", response_model=SessionInfo, tags=["sessions"])
    async def get_session(session: Owned) -> SessionInfo:
        return session_info(session)

    @app.get(
        "/v1/sessions/{sid}/transcript",
        response_model=TranscriptResponse,
        tags=["sessions"],
        responses={
            200: {"content": {CONTENT_TYPES[f].split(";")[0]: {} for f in TEXT_FORMATS}},
            400: {"model": ErrorBody},
        },
    )
    async def get_transcript(
        session: Owned,
        format: Annotated[str, Query(description="json (default), txt, srt or vtt")] = "json",
        version: Annotated[int | None, Query(ge=1, description="a kept version")] = None,
    ) -> TranscriptResponse | Response:
        """The transcript: JSON, or as plain text (``txt``) or subtitles (``srt``,
        ``vtt``) with speaker labels where the segments have them; the current
        version, or an earlier one that a re-transcription replaced."""
        fmt = transcript_format(format)
        transcript = await transcript_of(ctx.store, session, version)
        if fmt is not TranscriptFormat.JSON:
            return Response(
                render(list(transcript.segments), fmt),
                media_type=CONTENT_TYPES[fmt],
                headers={"content-disposition": f'attachment; filename="{session.sid}.{fmt}"'},
            )
        return transcript

    @app.post(
        "/v1/sessions/{sid}/retranscribe",
        status_code=202,
        response_model=RetranscribeAccepted,
        tags=["sessions"],
        responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
    )
    async def retranscribe(
        caller: Caller, sid: str, request: RetranscribeRequest
    ) -> RetranscribeAccepted:
        """Transcribe the session's stored audio again, as its next transcript version."""
        return await again.start(await session_of(sid, caller.id), caller.name, request)

    @app.get("/v1/sessions/{sid}/messages", response_model=MessagesPage, tags=["sessions"])
    async def get_messages(
        session: Owned,
        after: Annotated[int, Query(ge=0, description="return messages with seq > after")] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    ) -> MessagesPage:
        messages = await ctx.store.messages_after(session.sid, after, limit)
        return MessagesPage(sid=session.sid, messages=messages, last_seq=session.last_seq)

    @app.post(
        "/v1/sessions/{sid}/prompts",
        status_code=202,
        response_model=PromptChange,
        tags=["streams"],
        responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
    )
    async def change_prompts(session: Owned, change: PromptChange) -> PromptChange:
        """Add or remove standing prompts of a live stream (applied from its next final)."""
        await streams.change_prompts(session, change)
        return change

    @app.post(
        "/v1/search",
        response_model=SearchPage,
        tags=["search"],
        responses={400: {"model": ErrorBody}, 401: {"model": ErrorBody}},
    )
    async def search(caller: Caller, query: SearchQuery) -> SearchPage:
        """Segments of the caller's transcripts that answer the query, best first."""
        return await ctx.search.search(caller.id, query)

    @app.post(
        "/v1/tokens",
        status_code=201,
        response_model=TokenResponse,
        tags=["tokens"],
        responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}},
    )
    async def create_token(caller: Caller, request: TokenRequest) -> TokenResponse:
        """A short-lived token for a browser: it connects to the broker with it as
        password and may follow (and stream audio to) only these sessions."""
        for sid in request.sids:
            await session_of(sid, caller.id)
        grant = tokens.issue(caller.id, list(request.sids), request.ttl_s)
        await ctx.access.add_token(grant)
        return TokenResponse(
            token=grant.token,
            username=grant.username,
            sids=tuple(sorted(grant.sids)),
            expires_at=grant.expires_at,
            ws_url=settings.broker_urls[1],
        )

    if settings.security.hook_secret.get_secret_value():
        app.include_router(
            emqx_hooks(
                ctx.store, tokens, settings.security.hook_secret, settings.servers.mqtt_password
            )
        )

    @app.get("/v1/sessions/{sid}/audio", tags=["sessions"], response_class=Response)
    async def get_audio(session: Owned) -> Response:
        """The uploaded file as it came, else (a live stream) its archived audio as WAV."""
        key = ctx.blobs.find(session.sid, "original.")
        if key is None:
            return Response(await archived_wav(ctx.blobs, session.sid), media_type="audio/wav")
        data = await asyncio.to_thread(ctx.blobs.get, key)
        media = mimetypes.guess_type(key)[0] or "application/octet-stream"
        return Response(content=data, media_type=media)

    mount_web_app(app)
    app.add_middleware(BodyLimit, exempt=_is_upload)
    app.add_middleware(RequestMetrics)
    return app


def _credential(request: Request) -> str | None:
    """An API key or a session token: ``Authorization: Bearer`` or ``X-API-Key``."""
    header = request.headers.get("authorization", "")
    found = header[7:].strip() if header.lower().startswith("bearer ") else None
    return found or request.headers.get("x-api-key") or None


def _is_upload(scope: MutableMapping[str, Any]) -> bool:
    """The upload reads its body itself, within ``max_upload_mb``."""
    return bool(scope["method"] == "POST" and scope["path"] == "/v1/sessions")


async def _read_limited(file: UploadFile, uploads: UploadService) -> bytes:
    chunks, size = [], 0
    while chunk := await file.read(1 << 20):
        size += len(chunk)
        uploads.check_size(size)
        chunks.append(chunk)
    return b"".join(chunks)
