"""An OpenAI request follows its session in the store until the session ends
(:mod:`voxwire.sessions.follow`): :func:`finished` waits for the transcript (a
failed session is an :class:`~voxwire.gateway.openai_api.errors.OpenAIError`),
:func:`text_events` yields a text delta for each final segment as it is
stored, then the whole text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from voxwire.gateway.openai_api.errors import SERVER_ERROR, OpenAIError
from voxwire.gateway.openai_api.shapes import TextDelta, TextDone
from voxwire.sessions import follow
from voxwire.store import SessionRecord, Store
from voxwire_client.messages import ErrorMessage, SegmentMessage, SessionStatus, TranscriptMessage

MAX_WAIT_S = 3600.0
"""The longest a request waits for its session (longer: a 504; the session goes on)."""


async def finished(store: Store, sid: str, *, max_wait_s: float = MAX_WAIT_S) -> SessionRecord:
    """The session once it has completed; OpenAIError when it failed or ran too long."""
    session = await follow.finished(store, sid, max_wait_s=max_wait_s)
    if session is None:
        raise _too_long(sid, max_wait_s)
    return _completed(session)


async def text_events(
    store: Store, sid: str, *, max_wait_s: float = MAX_WAIT_S
) -> AsyncIterator[TextDelta | TextDone]:
    """Each final segment's text as it is stored, then the whole text; OpenAIError
    (raised from the iterator) when the session failed or ran too long."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    said, whole = False, None
    async for step in follow.follow(store, sid):
        for message in step.messages:
            if isinstance(message, SegmentMessage) and message.type == "final":
                text = message.segment.text.strip()
                if text:
                    yield TextDelta(delta=f" {text}" if said else text)
                    said = True
            elif isinstance(message, TranscriptMessage):
                whole = message.text
            elif isinstance(message, ErrorMessage) and message.fatal:
                raise _failed(sid, message.code, message.message)
        if step.session is not None and step.terminal:
            yield TextDone(text=_completed(step.session).text if whole is None else whole)
            return
        if loop.time() > deadline:
            raise _too_long(sid, max_wait_s)


def _completed(session: SessionRecord) -> SessionRecord:
    if session.status is SessionStatus.FAILED:
        raise _failed(session.sid, session.error_code, session.error_message)
    return session


def _failed(sid: str, code: str | None, message: str | None) -> OpenAIError:
    return OpenAIError(
        500, f"session {sid} failed: {message or 'no reason given'}", code=code, kind=SERVER_ERROR
    )


def _too_long(sid: str, max_wait_s: float) -> OpenAIError:
    return OpenAIError(
        504,
        f"session {sid} is still running after {max_wait_s:.0f} s; "
        f"fetch its transcript later from /v1/sessions/{sid}/transcript",
        code="timeout",
        kind=SERVER_ERROR,
    )
