"""Errors in Deepgram's shape, ``{"err_code", "err_msg", "request_id"}``, with the
status Deepgram gives them: 400 ``Bad Request`` for a parameter, a model or a
feature voxwire does not have (the message names it), 401 ``INVALID_AUTH``, 413
for too much audio, 429 for the rate limit, 5xx for a session that failed.

:class:`DeepgramError` is what the Deepgram routes raise themselves; a
:class:`~voxwire.core.errors.VoxwireError` from the layers below is translated
by :func:`from_voxwire` (audio that cannot be decoded is Deepgram's 400, not
voxwire's 422). ``request_id`` is the session's id once there is a session, else
a fresh id, as Deepgram gives every request one.
"""

from __future__ import annotations

import math
import uuid

from fastapi.responses import JSONResponse

from voxwire.core.errors import VoxwireError
from voxwire.core.metrics import ERRORS
from voxwire.core.ratelimit import RateLimitedError
from voxwire.gateway.deepgram_api.shapes import ErrorBody
from voxwire.gateway.errors import status_for
from voxwire_client.errors import InvalidSessionIdError

BAD_REQUEST = "Bad Request"
INVALID_AUTH = "INVALID_AUTH"
REQUEST_ID_HEADER = "dg-request-id"
ERROR_HEADER = "dg-error"
"""Deepgram names a refused WebSocket handshake's reason in this header too."""


class DeepgramError(Exception):
    """An answer of the Deepgram routes: ``status``, ``err_code`` and ``err_msg``."""

    def __init__(self, status: int, message: str, code: str = BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s: float | None = None


def unsupported(name: str, why: str) -> DeepgramError:
    """A 400 for a parameter or feature voxwire does not have, naming it."""
    return DeepgramError(400, f"Bad Request: {name} is not supported by this server: {why}")


def invalid_auth() -> DeepgramError:
    return DeepgramError(
        401,
        "Invalid credentials. Send a voxwire API key as 'Authorization: Token <key>' "
        "(or as the WebSocket subprotocols 'token, <key>'); create one with "
        "`voxwire keys create`.",
        INVALID_AUTH,
    )


def from_voxwire(exc: VoxwireError | InvalidSessionIdError) -> DeepgramError:
    """The Deepgram answer to an error of the layers below."""
    if isinstance(exc, InvalidSessionIdError):
        return DeepgramError(400, f"Bad Request: {exc.message}")
    ERRORS.labels(code=exc.code).inc()
    status = status_for(exc)
    message = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    if status == 401:
        return DeepgramError(401, message, INVALID_AUTH)
    if status in (400, 422):  # a bad option, or audio that cannot be used
        return DeepgramError(400, f"Bad Request: {message}")
    codes = {403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE"}
    codes |= {429: "TOO_MANY_REQUESTS", 503: "SERVICE_UNAVAILABLE"}
    error = DeepgramError(status, message, codes.get(status, "INTERNAL_SERVER_ERROR"))
    if isinstance(exc, RateLimitedError):
        error.retry_after_s = exc.retry_after_s
    return error


def header_text(message: str) -> str:
    """``message`` as an HTTP header value: one line of ASCII, at most 200 characters."""
    return " ".join(message.split())[:200].encode("ascii", "replace").decode()


def new_request_id() -> str:
    return str(uuid.uuid4())


def error_response(exc: DeepgramError, request_id: str | None = None) -> JSONResponse:
    """``exc`` as the answer Deepgram would give."""
    request_id = request_id or new_request_id()
    body = ErrorBody(err_code=exc.code, err_msg=exc.message, request_id=request_id)
    headers = {REQUEST_ID_HEADER: request_id, ERROR_HEADER: header_text(exc.message)}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    return JSONResponse(body.model_dump(), status_code=exc.status, headers=headers)
