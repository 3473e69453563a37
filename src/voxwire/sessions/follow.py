"""Following a session through the store, for the routes that answer in another
API's shape (OpenAI's, Deepgram's) while the session runs.

The store is where both modes record every message of a session, so a gateway
follows sessions that any worker transcribes. :func:`follow` yields a
:class:`Step` each time it asks: the session as read then and the messages
stored since the step before. The session is read before the messages, so the
step that finds it terminal also holds its last messages. :func:`finished`
waits for a terminal session only. Deadlines are the caller's: each API says
"too long" in its own shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from voxwire.store import SessionRecord, Store
from voxwire_client.messages import Message

POLL_S = 0.1
"""How often the store is asked while a session runs."""
PAGE = 1000
"""Messages asked for at once; a step asks again until it has them all."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one look at the store found."""

    session: SessionRecord | None
    """None until the session is recorded."""
    messages: list[Message]
    """Stored since the step before, in ``seq`` order."""

    @property
    def terminal(self) -> bool:
        """The session completed or failed: no message follows."""
        return self.session is not None and self.session.status.terminal


async def follow(store: Store, sid: str, *, poll_s: float = POLL_S) -> AsyncIterator[Step]:
    """Each look at ``sid`` in the store, ``poll_s`` apart, up to the terminal one."""
    after = 0
    while True:
        session = await store.get_session(sid)  # before the messages: none is missed
        messages: list[Message] = []
        while True:
            page = await store.messages_after(sid, after, limit=PAGE)
            messages += page
            after = max((m.seq for m in page), default=after)
            if len(page) < PAGE:
                break
        step = Step(session, messages)
        yield step
        if step.terminal:
            return
        await asyncio.sleep(poll_s)


async def finished(
    store: Store, sid: str, *, max_wait_s: float, poll_s: float = POLL_S
) -> SessionRecord | None:
    """The session once it is terminal; None when it still runs after ``max_wait_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    while True:
        session = await store.get_session(sid)
        if session is not None and session.status.terminal:
            return session
        if loop.time() > deadline:
            return None
        await asyncio.sleep(poll_s)
