"""An OpenAI request follows its session in the store until the session ends:
:func:`finished` waits for the transcript (a failed session is an
:class:`~voxwire.gateway.openai_api.errors.OpenAIError`), :func:`text_events`
yields a text delta for each final segment as it is stored, then the whole
text. The store is where both modes record every message of a session, so a
gateway follows sessions that any worker transcribes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from voxwire.gateway.openai_api.errors import SERVER_ERROR, OpenAIError
from voxwire.gateway.openai_api.shapes import TextDelta, TextDone
from voxwire.store import SessionRecord, Store
from voxwire_client.messages import ErrorMessage, SegmentMessage, SessionStatus, TranscriptMessage

POLL_S = 0.1
"""How often the store is asked while a session runs."""
MAX_WAIT_S = 3600.0
"""The longest a request waits for its session (longer: a 504; the session goes on)."""


async def finished(
    store: Store, sid: str, *, poll_s: float = POLL_S, max_wait_s: float = MAX_WAIT_S
) -> SessionRecord:
    """The session once it has completed; OpenAIError when it failed or ran too long."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    while True:
        session = await store.get_session(sid)
        if session is not None and session.status.terminal:
            return _completed(session)
        if loop.time() > deadline:
            raise _too_long(sid, max_wait_s)
        await asyncio.sleep(poll_s)


async def text_events(
    store: Store, sid: str, *, poll_s: float = POLL_S, max_wait_s: float = MAX_WAIT_S
) -> AsyncIterator[TextDelta | TextDone]:
    """Each final segment's text as it is stored, then the whole text; OpenAIError
    (raised from the iterator) when the session failed or ran too long."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    after, said, whole = 0, False, None
    while True:
        session = await store.get_session(sid)  # before the messages: none is missed
        for message in await store.messages_after(sid, after):
            after = max(after, message.seq)
            if isinstance(message, SegmentMessage) and message.type == "final":
                text = message.segment.text.strip()
                if text:
                    yield TextDelta(delta=f" {text}" if said else text)
                    said = True
            elif isinstance(message, TranscriptMessage):
                whole = message.text
            elif isinstance(message, ErrorMessage) and message.fatal:
                raise _failed(sid, message.code, message.message)
        if session is not None and session.status.terminal:
            yield TextDone(text=_completed(session).text if whole is None else whole)
            return
        if loop.time() > deadline:
            raise _too_long(sid, max_wait_s)
        await asyncio.sleep(poll_s)


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
