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
from voxwire.store import SqliteStore


def gateway_client(
    tmp_path: Path,
    store: SqliteStore,
    tokens: TokenIssuer | None = None,
    bus: MemoryBus | None = None,
    **settings: Any,
) -> httpx.AsyncClient:
    context = GatewayContext(
        Settings(data_dir=tmp_path, **settings),
        store,
        bus or MemoryBus(),
        LocalBlobStore(tmp_path / "blobs"),
        0,
        SqliteSearchIndex(tmp_path / "search.sqlite3"),
        tokens=tokens,
    )
    transport = httpx.ASGITransport(app=create_app(context))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")
