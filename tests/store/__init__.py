"""Store tests, and how tests reach the real servers of distributed mode.

The servers come from ``scripts/services.sh start postgres redis opensearch``.
Their addresses are read from ``VOXWIRE_POSTGRES_DSN``, ``VOXWIRE_REDIS_URL`` and
``VOXWIRE_OPENSEARCH_URL``; unset, they default to the script's ports with the
passwords it keeps in ``.services/secrets.env`` (what ``services.sh env`` prints).

A server that cannot be reached skips its tests with the reason, except when
``CI`` is set: then they fail, so a broken CI service never passes silently.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from voxwire.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]


def _secrets() -> dict[str, str]:
    state = Path(os.environ.get("VOXWIRE_SERVICES_DIR") or ROOT / ".services")
    values: dict[str, str] = {}
    with suppress(OSError):
        for line in (state / "secrets.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                values[key.strip()] = value.strip()
    return values


def postgres_dsn() -> str:
    if dsn := os.environ.get("VOXWIRE_POSTGRES_DSN"):
        return dsn
    password = _secrets().get("VOXWIRE_POSTGRES_PASSWORD", "")
    return f"postgresql://voxwire:{password}@127.0.0.1:15432/voxwire"


def redis_url() -> str:
    if url := os.environ.get("VOXWIRE_REDIS_URL"):
        return url
    password = _secrets().get("VOXWIRE_REDIS_PASSWORD", "")
    return f"redis://:{password}@127.0.0.1:16379/0"


def opensearch_url() -> str:
    return os.environ.get("VOXWIRE_OPENSEARCH_URL") or "http://127.0.0.1:19200"


def unavailable(service: str, reason: str) -> NoReturn:
    """Skip the test (fail it when ``CI`` is set): ``service`` cannot be reached."""
    message = (
        f"{service} is not reachable ({reason}); "
        f"start it with `scripts/services.sh start {service}`"
    )
    if os.environ.get("CI"):
        pytest.fail(f"{message} [CI is set: failing instead of skipping]")
    pytest.skip(message)


@cache
def _probe(service: str) -> str | None:
    """None when ``service`` answers, else why not (asked once per run)."""
    try:
        if service == "postgres":
            import psycopg

            with psycopg.connect(postgres_dsn(), connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        elif service == "redis":
            import redis

            client = redis.Redis.from_url(redis_url(), socket_connect_timeout=3, socket_timeout=3)
            with client:
                client.ping()
        else:
            from opensearchpy import OpenSearch

            search = OpenSearch(hosts=[opensearch_url()], timeout=3, max_retries=0)
            search.info()
            search.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def require(service: str) -> None:
    """Skip or fail (see :func:`unavailable`) unless ``service`` answers."""
    reason = _probe(service)
    if reason is not None:
        unavailable(service, reason)


def fresh_schema() -> str:
    return "vxtest_" + secrets.token_hex(6)


async def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(
        postgres_dsn(), autocommit=True, connect_timeout=5
    ) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


async def pg_query(schema: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows of ``query`` run in ``schema`` on a connection of its own."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        postgres_dsn(), autocommit=True, connect_timeout=5, options=f"-c search_path={schema}"
    ) as conn:
        cur = await conn.execute(query.encode(), args or None)
        return await cur.fetchall() if cur.description else []


@asynccontextmanager
async def postgres_store(schema: str | None = None) -> AsyncIterator[PostgresStore]:
    """A PostgresStore in a schema of its own, dropped afterwards."""
    require("postgres")
    from voxwire.store.postgres import PostgresStore

    schema = schema or fresh_schema()
    try:
        store = await PostgresStore.open(postgres_dsn(), schema=schema, timeout=5)
        try:
            yield store
        finally:
            await store.close()
    finally:
        await drop_schema(schema)
