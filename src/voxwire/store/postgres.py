"""PostgreSQL store for distributed mode (psycopg 3, one async connection pool).

It behaves like :class:`~voxwire.store.sqlite.SqliteStore`, message for message,
so the same contract tests run against both. What differs is storage:

- the schema comes from numbered migration files
  (:mod:`voxwire.store.postgres_migrations`), applied when the store opens;
- final segments are rows of ``segments`` (``sid``, ``idx``) as they arrive; the
  published transcript is one ``transcripts`` row: its segments as a JSONB
  array and its text. (Appending each final segment to the JSONB array instead
  rewrites the whole array every time: measured, 4,600 segments/s at 50 per
  session fell to 1,200/s at 500 per session.) Full-text search is not the
  store's: it is SQLite FTS5 or OpenSearch (:mod:`voxwire.search`);
- :meth:`PostgresStore.record_messages` stores a batch in one transaction, in
  pipeline mode (:mod:`voxwire.store.postgres_writes`).

psycopg errors are translated to :class:`~voxwire.core.errors.StoreError` where
they leave this module.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import TypeAdapter

from voxwire.access import keys as auth
from voxwire.access.keys import KeyGrant, KeyRole, NewKey
from voxwire.access.owners import SessionOwner
from voxwire.core.errors import StoreError
from voxwire.store.base import (
    ApiKeyInfo,
    Reopened,
    SessionRecord,
    SessionState,
    Tenant,
    by_version,
)
from voxwire.store.postgres_migrations import migrate
from voxwire.store.postgres_usage import PostgresQuotas
from voxwire.store.postgres_webhooks import PostgresWebhooks
from voxwire.store.postgres_writes import Conn, record, record_new
from voxwire.store.usage import Metered, count_metered
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    MESSAGE_ADAPTER,
    MatchData,
    Message,
    SegmentData,
    SessionStatus,
    TranscriptMessage,
)

log = logging.getLogger(__name__)

_PROMPTS = TypeAdapter(tuple[PromptSpec, ...])
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_RETRIES = 3  # a batch that lost a deadlock is retried this many times in all
_LOST_TO_ANOTHER_WRITER = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.TransactionRollback,
)


# -- the store ----------------------------------------------------------------


class PostgresStore(PostgresQuotas, PostgresWebhooks):
    """The :class:`~voxwire.store.base.Store` on PostgreSQL; open with :meth:`open`."""

    def __init__(self, pool: AsyncConnectionPool[Conn], schema: str | None = None) -> None:
        self._pool = pool
        self._schema = schema

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
    ) -> PostgresStore:
        """Connect, apply missing migrations, and return a ready store.

        ``schema`` puts every table in that schema (created when missing), so
        several voxwire installations or test runs can share one database.
        """
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise StoreError(f"invalid schema name {schema!r}", hint="use [a-z0-9_], 63 at most")
        options = conninfo_to_dict(dsn).get("options") or ""
        options = f"{options} -c TimeZone=UTC".strip()
        if schema:
            options += f" -c search_path={schema}"
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            dsn,
            connection_class=AsyncConnection[DictRow],
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "options": options,
                "connect_timeout": max(1, round(timeout)),
            },
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            check=AsyncConnectionPool.check_connection,
            name="voxwire-store",
        )
        try:
            await pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            await pool.close()
            reason = await _why_not(dsn, timeout)
            raise StoreError(
                f"cannot connect to PostgreSQL within {timeout:g}s"
                + (f": {reason}" if reason else ""),
                hint="check VOXWIRE_POSTGRES_DSN and that the server is running",
            ) from exc
        store = cls(pool, schema)
        try:
            await store.migrate()
        except BaseException:
            await pool.close()
            raise
        return store

    async def ping(self) -> None:
        """A round trip to PostgreSQL through the pool (readiness)."""
        await self._one("SELECT 1")

    async def migrate(self) -> list[int]:
        """Apply missing migrations (safe to call concurrently); the versions applied."""
        async with self._connection() as conn:
            return await migrate(conn, self._schema)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreError("no PostgreSQL connection available", hint=str(exc)) from exc
        except psycopg.Error as exc:
            state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
            raise StoreError(f"PostgreSQL: {exc}{state}".strip()) from exc

    async def _one(self, query: Any, args: Sequence[object] = ()) -> DictRow | None:
        async with self._connection() as conn:
            cur = await conn.execute(query, args)
            return await cur.fetchone()

    async def _all(self, query: Any, args: Sequence[object] = ()) -> list[DictRow]:
        async with self._connection() as conn:
            cur = await conn.execute(query, args)
            return await cur.fetchall()

    async def _run(self, query: Any, args: Sequence[object] = ()) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(query, args)
            return cur.rowcount

    # -- tenants and keys ---------------------------------------------------

    async def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id="t_" + secrets.token_hex(6), name=name, created_at=datetime.now(UTC))
        await self._run(
            "INSERT INTO tenants (id, name, created_at) VALUES (%s, %s, %s)",
            (tenant.id, tenant.name, tenant.created_at),
        )
        return tenant

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        row = await self._one("SELECT * FROM tenants WHERE id = %s", (tenant_id,))
        return _tenant(row) if row else None

    async def tenant_by_name(self, name: str) -> Tenant | None:
        row = await self._one(
            "SELECT * FROM tenants WHERE name = %s ORDER BY created_at LIMIT 1", (name,)
        )
        return _tenant(row) if row else None

    async def add_api_key(
        self, tenant_id: str, key: NewKey, label: str, role: KeyRole = "tenant"
    ) -> ApiKeyInfo:
        created = datetime.now(UTC)
        await self._run(
            "INSERT INTO api_keys (id, tenant_id, digest, label, created_at, role) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (key.key_id, tenant_id, key.digest, label, created, role),
        )
        return ApiKeyInfo(key.key_id, tenant_id, label, created, None, role)

    async def list_api_keys(self) -> list[ApiKeyInfo]:
        rows = await self._all("SELECT * FROM api_keys ORDER BY created_at")
        return [
            ApiKeyInfo(
                r["id"], r["tenant_id"], r["label"], r["created_at"], r["revoked_at"], r["role"]
            )
            for r in rows
        ]

    async def revoke_api_key(self, key_id: str) -> bool:
        changed = await self._run(
            "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
            (datetime.now(UTC), key_id),
        )
        return changed > 0

    async def verify_api_key(self, plaintext: str) -> Tenant | None:
        key_id = auth.key_id_of(plaintext)
        if key_id is None:
            return None
        row = await self._one(
            "SELECT t.*, k.digest FROM api_keys k JOIN tenants t ON t.id = k.tenant_id "
            "WHERE k.id = %s AND k.revoked_at IS NULL",
            (key_id,),
        )
        if row is None or not auth.matches(plaintext, row["digest"]):
            return None
        return _tenant(row)

    async def active_key(self, key_id: str) -> KeyGrant | None:
        row = await self._one(
            "SELECT id, tenant_id, role FROM api_keys WHERE id = %s AND revoked_at IS NULL",
            (key_id,),
        )
        return _grant(row) if row else None

    async def key_issued(self, key_id: str) -> bool:
        return await self._one("SELECT 1 FROM api_keys WHERE id = %s", (key_id,)) is not None

    async def key_grant(self, plaintext: str) -> KeyGrant | None:
        """What a valid key acts as (the gateway, the broker's HTTP auth endpoint)."""
        key_id = auth.key_id_of(plaintext)
        if key_id is None:
            return None
        row = await self._one(
            "SELECT id, tenant_id, role, digest FROM api_keys WHERE id = %s AND revoked_at IS NULL",
            (key_id,),
        )
        if row is None or not auth.matches(plaintext, row["digest"]):
            return None
        return _grant(row)

    async def session_owner(self, sid: str) -> SessionOwner | None:
        """The tenant and key owning ``sid`` (for the broker's HTTP ACL endpoint)."""
        row = await self._one(
            "SELECT tenant_id, key_id FROM sessions WHERE sid = %s AND deleted_at IS NULL", (sid,)
        )
        return SessionOwner(row["tenant_id"], row["key_id"]) if row else None

    # -- sessions -----------------------------------------------------------

    async def create_session(
        self, session: SessionRecord, redact: RedactMode | None = None
    ) -> None:
        await self._run(
            "INSERT INTO sessions (sid, tenant_id, status, created_at, filename, duration_ms, "
            "prompts, key_id, redact, kind) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s)",
            (
                session.sid,
                session.tenant_id,
                session.status.value,
                session.created_at,
                session.filename,
                session.duration_ms,
                _PROMPTS.dump_json(session.prompts).decode(),
                session.key_id,
                redact.value if redact else None,
                session.kind,
            ),
        )

    async def get_session(self, sid: str) -> SessionRecord | None:
        row = await self._one(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid WHERE s.sid = %s AND s.deleted_at IS NULL",
            (sid,),
        )
        return _session(row) if row else None

    async def list_sessions(self, tenant_id: str, limit: int = 100) -> list[SessionRecord]:
        rows = await self._all(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid "
            "WHERE s.tenant_id = %s AND s.deleted_at IS NULL ORDER BY s.created_at DESC LIMIT %s",
            (tenant_id, limit),
        )
        return [_session(r) for r in rows]

    async def all_sessions(self, after: str = "", limit: int = 500) -> list[SessionRecord]:
        rows = await self._all(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid "
            "WHERE s.sid > %s AND s.deleted_at IS NULL ORDER BY s.sid LIMIT %s",
            (after, limit),
        )
        return [_session(r) for r in rows]

    async def count_sessions(self) -> int:
        row = await self._one("SELECT count(*) AS n FROM sessions WHERE deleted_at IS NULL")
        return int(row["n"]) if row else 0

    # -- messages -------------------------------------------------------------

    async def record_message(self, message: Message) -> bool:
        """Store and apply ``message``; False when its ``seq`` was already stored."""
        return await self.record_messages([message]) == 1

    async def record_messages(self, messages: Sequence[Message]) -> int:
        """Store and apply ``messages`` in one transaction; how many were new.

        A message whose ``(sid, seq)`` is already stored, or repeats one earlier
        in the batch, is skipped. Effects are applied in batch order per session.

        Usually nothing in a batch was stored before, so it is first written
        as all new, in one round trip; a repeat aborts that transaction (the
        messages' primary key), and the batch is written again the careful
        way, learning which rows are new before applying them.
        """
        first: dict[tuple[str, int], Message] = {}
        for message in messages:
            first.setdefault((message.sid, message.seq), message)
        batch = list(first.values())
        if not batch:
            return 0
        for attempt in range(1, _RETRIES + 1):
            try:
                metered: list[Metered] = []
                async with self._connection() as conn:
                    with contextlib.suppress(psycopg.errors.UniqueViolation):
                        async with conn.pipeline(), conn.transaction():
                            new = await record_new(conn, batch, metered)
                        count_metered(metered)
                        return new
                    metered.clear()
                    async with conn.pipeline(), conn.transaction():
                        new = await record(conn, batch, metered)
                    count_metered(metered)
                    return new
            except StoreError as exc:
                lost = isinstance(exc.__cause__, _LOST_TO_ANOTHER_WRITER)
                if not lost or attempt == _RETRIES:
                    raise
                log.warning("record_messages: %s; retrying (%d)", exc, attempt)
        raise AssertionError("unreachable")

    async def messages_after(self, sid: str, after: int, limit: int = 1000) -> list[Message]:
        rows = await self._all(
            "SELECT payload::text AS payload FROM messages "
            "WHERE sid = %s AND seq > %s ORDER BY seq LIMIT %s",
            (sid, after, limit),
        )
        return [MESSAGE_ADAPTER.validate_json(r["payload"]) for r in rows]

    async def segments(self, sid: str) -> list[SegmentData]:
        rows = await self._all(
            "SELECT payload::text AS payload FROM segments WHERE sid = %s ORDER BY idx", (sid,)
        )
        return [SegmentData.model_validate_json(r["payload"]) for r in rows]

    async def matches(self, sid: str) -> list[MatchData]:
        rows = await self._all(
            "SELECT payload::text AS payload FROM matches WHERE sid = %s ORDER BY seq", (sid,)
        )
        return [MatchData.model_validate_json(r["payload"]) for r in rows]

    async def reopen_session(self, sid: str) -> Reopened | None:
        row = await self._one(
            "WITH s AS (UPDATE sessions SET status = 'queued', percent = 0, "
            "version = version + 1, error_code = NULL, error_message = NULL "
            "WHERE sid = %s AND status IN ('completed', 'failed') AND deleted_at IS NULL "
            "RETURNING *) "
            "SELECT s.*, COALESCE(t.text, '') AS text FROM s "
            "LEFT JOIN transcripts t ON t.sid = s.sid",
            (sid,),
        )
        if row is None:
            return None
        redact = row["redact"]
        return Reopened(_session(row), RedactMode(redact) if redact else None)

    async def transcript_versions(self, sid: str) -> list[TranscriptMessage]:
        rows = await self._all(
            "SELECT payload::text AS payload FROM messages "
            "WHERE sid = %s AND type = 'transcript' ORDER BY seq",
            (sid,),
        )
        return by_version(TranscriptMessage.model_validate_json(r["payload"]) for r in rows)

    # -- deletion -------------------------------------------------------------

    async def session_state(self, sid: str) -> SessionState | None:
        row = await self._one(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid WHERE s.sid = %s",
            (sid,),
        )
        if row is None:
            return None
        deleted, reason, purged = row["deleted_at"], row["deleted_reason"], row["purged_at"]
        return SessionState(_session(row), deleted, reason, purged)

    async def mark_deleted(self, sid: str, reason: str) -> bool:
        """A conditional update: of gateways tombstoning one sid at once, one wins."""
        changed = await self._run(
            "UPDATE sessions SET deleted_at = now(), deleted_reason = %s "
            "WHERE sid = %s AND deleted_at IS NULL",
            (reason, sid),
        )
        return changed > 0

    async def purge_session(self, sid: str) -> None:
        async with self._connection() as conn, conn.transaction():
            for statement in _PURGE:
                await conn.execute(statement, (sid,))
            await conn.execute(
                "UPDATE sessions SET filename = NULL, prompts = '[]'::jsonb, language = NULL, "
                "error_code = NULL, error_message = NULL, percent = 0 WHERE sid = %s",
                (sid,),
            )

    async def finish_deletion(self, sid: str) -> bool:
        changed = await self._run(
            "UPDATE sessions SET purged_at = now() "
            "WHERE sid = %s AND deleted_at IS NOT NULL AND purged_at IS NULL",
            (sid,),
        )
        return changed > 0

    async def unfinished_deletions(self, before: datetime, limit: int = 100) -> list[str]:
        rows = await self._all(
            "SELECT sid FROM sessions WHERE deleted_at IS NOT NULL AND purged_at IS NULL "
            "AND deleted_at < %s ORDER BY deleted_at LIMIT %s",
            (before, limit),
        )
        return [r["sid"] for r in rows]

    async def sessions_created_before(self, before: datetime, limit: int = 100) -> list[str]:
        rows = await self._all(
            "SELECT sid FROM sessions WHERE deleted_at IS NULL AND created_at < %s "
            "ORDER BY created_at LIMIT %s",
            (before, limit),
        )
        return [r["sid"] for r in rows]

    async def deleted_among(self, sids: Collection[str]) -> set[str]:
        if not sids:
            return set()
        rows = await self._all(
            "SELECT sid FROM sessions WHERE deleted_at IS NOT NULL AND sid = ANY(%s)",
            (list(sids),),
        )
        return {r["sid"] for r in rows}

    async def close(self) -> None:
        await self._pool.close()


_PURGE = (
    "DELETE FROM messages WHERE sid = %s",
    "DELETE FROM segments WHERE sid = %s",
    "DELETE FROM matches WHERE sid = %s",
    "DELETE FROM transcripts WHERE sid = %s",
)
"""What deleting a session removes from its rows (its content, every version)."""


def _tenant(row: DictRow) -> Tenant:
    return Tenant(id=row["id"], name=row["name"], created_at=row["created_at"])


def _session(row: DictRow) -> SessionRecord:
    return SessionRecord(
        sid=row["sid"],
        tenant_id=row["tenant_id"],
        status=SessionStatus(row["status"]),
        created_at=row["created_at"],
        filename=row["filename"],
        duration_ms=row["duration_ms"],
        percent=row["percent"],
        last_seq=row["last_seq"],
        prompts=_PROMPTS.validate_python(row["prompts"]),
        language=row["language"],
        text=row["text"],
        error_code=row["error_code"],
        error_message=row["error_message"],
        key_id=row["key_id"],
        version=row["version"],
        kind=row["kind"] or ("file" if row["filename"] else "live"),
    )


def _grant(row: DictRow) -> KeyGrant:
    return KeyGrant(key_id=row["id"], tenant_id=row["tenant_id"], role=row["role"])


async def _why_not(dsn: str, timeout: float) -> str:
    """What one plain connection attempt says (the pool only logs it), first line only."""
    try:
        conn = await AsyncConnection.connect(dsn, connect_timeout=max(1, round(timeout)))
    except psycopg.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return lines[0] if lines else type(exc).__name__
    await conn.close()
    return ""
