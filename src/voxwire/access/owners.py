"""Who owns a session, asked of the store and kept for a short while.

The authorizer asks for the owner of a session on every publish and for every
subscriber a message goes to. Measured here (SQLite, two busy cores): a lookup
run off the event loop costs about 0.14 ms, a cached one under 1 µs. A session's
owner never changes once the session exists, so a found owner is kept for
``ttl_s``; a missing one is not (the session may be created a moment later).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionOwner:
    """Whose a session is: its tenant, and the key that opened it (None: unknown,
    a session made before keys were recorded, or by the platform itself)."""

    tenant_id: str
    key_id: str | None = None


OwnerLookup = Callable[[str], Awaitable[SessionOwner | None]]
"""Session id -> its owner, or None (``Store.session_owner``)."""

OWNER_TTL_S = 60.0
OWNER_CACHE_SIZE = 4096


class CachedOwners:
    """An :data:`OwnerLookup` that keeps up to ``max_size`` found owners ``ttl_s`` each."""

    def __init__(
        self,
        lookup: OwnerLookup,
        *,
        ttl_s: float = OWNER_TTL_S,
        max_size: int = OWNER_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl_s = ttl_s
        self._max_size = max_size
        self._clock = clock
        self._owners: dict[str, tuple[SessionOwner, float]] = {}
        """sid -> (owner, when it expires), oldest first."""

    async def __call__(self, sid: str) -> SessionOwner | None:
        now = self._clock()
        cached = self._owners.get(sid)
        if cached is not None and now < cached[1]:
            return cached[0]
        owner = await self._lookup(sid)
        self._owners.pop(sid, None)
        if owner is not None and self._ttl_s > 0 and self._max_size > 0:
            while len(self._owners) >= self._max_size:
                del self._owners[next(iter(self._owners))]
            self._owners[sid] = (owner, now + self._ttl_s)
        return owner
