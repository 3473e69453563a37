"""Errors in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``,
with the status OpenAI gives them: the ``openai`` SDK raises its own exception
for each status (401 :class:`AuthenticationError`, 404 :class:`NotFoundError`...).

:class:`OpenAIError` is what the OpenAI routes raise themselves (a model no one
serves, fields that do not go together, a session that failed); a
:class:`~voxwire.core.errors.VoxwireError` from the layers below keeps the
status the gateway gives it everywhere, and a malformed form is a 400 naming
its field (:func:`error_response` translates them all).
"""

from __future__ import annotations

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from voxwire.core.errors import VoxwireError
from voxwire.core.metrics import ERRORS
from voxwire.gateway.errors import retry_after, status_for
from voxwire.gateway.openai_api.shapes import ErrorDetail, ErrorResponse
from voxwire_client.errors import InvalidSessionIdError

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"


class OpenAIError(Exception):
    """An answer of the OpenAI routes: ``status`` and the error's body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = INVALID_REQUEST,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.detail = ErrorDetail(message=message, type=kind, param=param, code=code)


def model_not_found(model: str, served: tuple[str, ...]) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it. "
        f"Models served here: {', '.join(served)}; whisper-1 and the gpt-4o transcribe "
        "models stand for the default.",
        param="model",
        code="model_not_found",
    )


def from_voxwire(exc: VoxwireError) -> OpenAIError:
    status = status_for(exc)
    message = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    if status == 401:
        return OpenAIError(401, message, code="invalid_api_key")
    if exc.code == "quota_exceeded":  # OpenAI's answer when a plan's quota is used up
        return OpenAIError(429, message, code="insufficient_quota", kind="insufficient_quota")
    if status == 429:
        return OpenAIError(429, message, code="rate_limit_exceeded", kind="requests")
    if status == 422:  # audio that cannot be used: OpenAI's answer to a bad file
        status = 400
    kind = SERVER_ERROR if status >= 500 else INVALID_REQUEST
    return OpenAIError(status, message, code=exc.code, kind=kind)


def from_validation(exc: RequestValidationError) -> OpenAIError:
    first = exc.errors()[0] if exc.errors() else {}
    where = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "header")]
    param = where[0] if where else None
    missing = first.get("type") == "missing"
    message = (
        f"you must provide a {param}" if missing and param else str(first.get("msg", "invalid"))
    )
    return OpenAIError(
        400, message, param=param, code="missing_required_parameter" if missing else None
    )


ANSWERED = (OpenAIError, VoxwireError, InvalidSessionIdError, RequestValidationError)
"""The errors the OpenAI routes answer in OpenAI's shape."""


def error_response(
    exc: OpenAIError | VoxwireError | InvalidSessionIdError | RequestValidationError,
) -> JSONResponse:
    """``exc`` as the answer OpenAI would give."""
    headers = retry_after(exc)
    if isinstance(exc, VoxwireError):
        ERRORS.labels(code=exc.code).inc()
        exc = from_voxwire(exc)
    elif isinstance(exc, InvalidSessionIdError):
        exc = OpenAIError(400, exc.message, code=exc.code)
    elif isinstance(exc, RequestValidationError):
        exc = from_validation(exc)
    body = ErrorResponse(error=exc.detail)
    return JSONResponse(body.model_dump(), status_code=exc.status, headers=headers)
