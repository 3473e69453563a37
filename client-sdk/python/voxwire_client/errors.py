"""Errors raised by the voxwire client::

ClientError
├── InvalidSessionIdError   a session id that is unsafe in a topic
├── ConfigurationError      no gateway URL or API key could be found
├── ApiError                the gateway answered with an error (has ``status``, ``code``, ``hint``)
│   └── AuthenticationError 401/403
├── ConnectionFailedError   the gateway or the broker cannot be reached
└── TranscriptionFailed     the session ended with an error message
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of every client error."""

    code = "client"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidSessionIdError(ClientError, ValueError):
    code = "invalid_session_id"


class ConfigurationError(ClientError):
    code = "configuration"


class ApiError(ClientError):
    """An error answer from the gateway."""

    def __init__(
        self, message: str, *, status: int, code: str = "api", hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


class AuthenticationError(ApiError):
    pass


class ConnectionFailedError(ClientError):
    code = "connection"


class TranscriptionFailed(ClientError):
    """The server reported an error for the session."""

    def __init__(self, message: str, *, code: str, sid: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.sid = sid
