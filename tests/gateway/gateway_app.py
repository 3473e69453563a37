"""A gateway app on a real SQLite store, in-process bus and search, for tests
that call its routes through httpx's ASGI transport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from voxwire.access.tokens import TokenIssuer
from voxwire.blobs import LocalBlobStore
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings
from voxwire.gateway.app import GatewayContext, create_app
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.sessions.pools import PoolCheck
from voxwire.store import SqliteStore


def gateway_client(
    tmp_path: Path,
    store: SqliteStore,
    tokens: TokenIssuer | None = None,
    bus: MemoryBus | None = None,
    *,
    pools: bool = False,
    **settings: Any,
) -> httpx.AsyncClient:
    """``pools``: the gateway asks the bus whether a worker runs a session's model
    (as the platform's does); else it accepts sessions with no worker in sight."""
    config = Settings(data_dir=tmp_path, **settings)
    bus = bus or MemoryBus()
    context = GatewayContext(
        config,
        store,
        bus,
        LocalBlobStore(tmp_path / "blobs"),
        0,
        SqliteSearchIndex(tmp_path / "search.sqlite3"),
        tokens=tokens,
        pools=PoolCheck(bus, config) if pools else None,
    )
    transport = httpx.ASGITransport(app=create_app(context))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")
