"""The SDK's methods for transcript versions (:mod:`voxwire_client.versions`) and
the session list a batch of re-transcriptions starts from, mixed into
:class:`~voxwire_client.client.AsyncClient`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol

import httpx
from pydantic import TypeAdapter

from voxwire_client.api import SessionInfo, TranscriptResponse
from voxwire_client.messages import Message, Task
from voxwire_client.topics import validate_sid
from voxwire_client.versions import RetranscribeAccepted, RetranscribeRequest

_SESSIONS = TypeAdapter(list[SessionInfo])


class _Client(Protocol):
    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    def events(self, sid: str, *, after_seq: int = 0) -> AsyncGenerator[Message]: ...


class VersionsMixin:
    async def sessions(self: _Client, limit: int = 100) -> list[SessionInfo]:
        """The caller's latest sessions (at most ``limit``, up to 1000), newest first."""
        response = await self._request("GET", "/v1/sessions", params={"limit": limit})
        return _SESSIONS.validate_json(response.content)

    async def retranscribe(
        self: _Client,
        sid: str,
        *,
        model: str | None = None,
        language: str | None = None,
        vocabulary: Sequence[str] = (),
        task: Task | None = None,
    ) -> RetranscribeAccepted:
        """Transcribe a finished session's stored audio again, as its next version
        (``model``: one the platform serves; ``task`` translate: in English).
        Follow it with :meth:`version_events`."""
        request = RetranscribeRequest(
            model=model, language=language, vocabulary=tuple(vocabulary), task=task
        )
        response = await self._request(
            "POST",
            f"/v1/sessions/{validate_sid(sid)}/retranscribe",
            json=request.model_dump(exclude_defaults=True),
        )
        return RetranscribeAccepted.model_validate_json(response.content)

    def version_events(self: _Client, accepted: RetranscribeAccepted) -> AsyncGenerator[Message]:
        """The messages of the version ``accepted`` makes, once each, in order, to its end."""
        return self.events(accepted.sid, after_seq=accepted.first_seq - 1)

    async def transcript_version(self: _Client, sid: str, version: int) -> TranscriptResponse:
        """The transcript of ``version`` (kept when a later one replaced it)."""
        path = f"/v1/sessions/{validate_sid(sid)}/transcript"
        response = await self._request("GET", path, params={"version": version})
        return TranscriptResponse.model_validate_json(response.content)
