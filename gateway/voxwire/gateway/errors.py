"""Errors as HTTP answers: each :class:`~voxwire.core.errors.VoxwireError` is a JSON
:class:`~voxwire_client.api.ErrorBody` with the status of its class (a rate limit's
also says ``Retry-After``, as a quota that resets at a set time does, and a quota's
names it in ``quota``); an invalid session id is a 400."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from voxwire.access.quotas import QuotaExceededError
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
from voxwire.core.metrics import ERRORS
from voxwire.core.ratelimit import RateLimitedError
from voxwire.search import SearchQueryError
from voxwire.sessions.pools import NoWorkerError
from voxwire.sessions.quotas import quota_detail
from voxwire_client.api import ErrorBody
from voxwire_client.errors import InvalidSessionIdError

_STATUS = {
    AuthError: 401,
    ForbiddenError: 403,
    RateLimitedError: 429,
    QuotaExceededError: 429,
    NotFoundError: 404,
    ConflictError: 409,
    InvalidRequestError: 400,
    PayloadTooLargeError: 413,
    SearchQueryError: 400,
    AudioTooLongError: 413,
    AudioError: 422,
    NoWorkerError: 503,
}


def add_error_handlers(app: FastAPI) -> None:
    app.exception_handler(VoxwireError)(voxwire_error)
    app.exception_handler(InvalidSessionIdError)(bad_sid)


async def voxwire_error(_request: Request, exc: VoxwireError) -> JSONResponse:
    body = ErrorBody(
        code=exc.code, message=exc.message, hint=exc.hint, sid=exc.sid, quota=quota_detail(exc)
    )
    ERRORS.labels(code=exc.code).inc()
    return JSONResponse(
        body.model_dump(mode="json"),
        status_code=status_for(exc),
        headers=retry_after(exc),
    )


def retry_after(exc: Exception) -> dict[str, str] | None:
    """The ``Retry-After`` header of a rate limit, or of a quota that resets at a set time."""
    wait = None
    if isinstance(exc, RateLimitedError):
        wait = exc.retry_after_s
    elif isinstance(exc, QuotaExceededError):
        wait = exc.retry_after_s(datetime.now(UTC))
    return None if wait is None else {"Retry-After": str(max(1, math.ceil(wait)))}


async def bad_sid(_request: Request, exc: InvalidSessionIdError) -> JSONResponse:
    body = ErrorBody(code=exc.code, message=exc.message, hint=exc.hint)
    ERRORS.labels(code=exc.code).inc()
    return JSONResponse(body.model_dump(), status_code=400)


def status_for(exc: VoxwireError) -> int:
    """The HTTP status the gateway answers ``exc`` with (500 for a class it does not list)."""
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500
