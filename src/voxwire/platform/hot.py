"""The relay's observers: Redis hot state (per-session status) beside the postgres store.

The one place that wires :class:`voxwire.store.hot.HotState`; with the sqlite
store the relay has no observer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from voxwire.bridge.relay import MessageObserver
from voxwire.core.config import Settings


@contextlib.asynccontextmanager
async def relay_observers(settings: Settings) -> AsyncIterator[tuple[MessageObserver, ...]]:
    if settings.store != "postgres":
        yield ()
        return
    from voxwire.store.hot import HotState

    hot = HotState.open(settings.redis_url.get_secret_value(), prefix=f"vx{settings.namespace}")
    try:
        yield (hot,)
    finally:
        await hot.close()
