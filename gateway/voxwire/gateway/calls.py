"""The telephony calls whose stream this gateway process holds open, across
their connections: a call whose connection dropped without ``stop`` is held
for a while, so that the platform's reconnection of the same call (a new
WebSocket, a new ``start``, the same ``callSid``) goes on with the same
session, its chunks numbered after those already sent; nothing heard before
the drop is lost or heard twice.

:class:`CallRegistry` keeps one :class:`HeldCall` per call from its first
``start`` until its stream ends: a ``stop``, the idle timeout, a refusal, or
the reconnect window passing after a drop. It lives on the app's state (one
per gateway process); it does no I/O: the ending it schedules is a coroutine
the route hands it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


class CallRefused(ValueError):
    """A ``start`` that cannot go on with its call's stream; the reason says why."""


@dataclass(eq=False)
class HeldCall:
    """One call's open stream."""

    sid: str
    tenant_id: str
    labels: tuple[str, ...] | None
    """Its channels' labels (None: mono): a reconnection must have the same."""
    next_chunk: int = 0
    """The number of the next chunk of the stream."""
    connected: bool = True
    """A connection streams it now."""
    ending: asyncio.Task[None] | None = field(default=None, repr=False)
    """The end scheduled after a drop, cancelled by a reconnection."""


class CallRegistry:
    """The calls held open by this process (see the module docstring)."""

    def __init__(self) -> None:
        self._calls: dict[str, HeldCall] = {}

    def get(self, sid: str) -> HeldCall | None:
        return self._calls.get(sid)

    def reconnect(self, sid: str, tenant_id: str, labels: tuple[str, ...] | None) -> HeldCall:
        """A new connection of call ``sid`` whose stream is held: it goes on
        with it. CallRefused while another connection streams it, or for
        another tenant, or another layout of channels."""
        held = self._calls[sid]
        if held.tenant_id != tenant_id:
            raise CallRefused(f"the session {sid} belongs to another account")
        if held.connected:
            raise CallRefused(f"the call's stream {sid} is connected already: one at a time")
        if held.labels != labels:
            raise CallRefused(
                f"the call's stream {sid} has channels {held.labels or 'mono'}, "
                f"this start {labels or 'mono'}: reconnect with the same tracks"
            )
        if held.ending is not None:
            held.ending.cancel()
            held.ending = None
        held.connected = True
        return held

    def open(self, sid: str, tenant_id: str, labels: tuple[str, ...] | None) -> HeldCall:
        """A call's first connection: its stream is now held here."""
        held = self._calls[sid] = HeldCall(sid, tenant_id, labels)
        return held

    def dropped(self, held: HeldCall, after_s: float, end: Callable[[], Awaitable[None]]) -> None:
        """``held``'s connection dropped without ``stop``: ``end`` it after
        ``after_s`` unless a reconnection comes first."""
        held.connected = False

        async def _end_later() -> None:
            await asyncio.sleep(after_s)
            if self._calls.get(held.sid) is held and not held.connected:
                del self._calls[held.sid]
                await end()

        held.ending = asyncio.get_running_loop().create_task(_end_later())

    def close(self, held: HeldCall) -> None:
        """``held``'s stream ended (stop, idle, refusal): forget it."""
        if self._calls.get(held.sid) is held:
            del self._calls[held.sid]
        if held.ending is not None:
            held.ending.cancel()
