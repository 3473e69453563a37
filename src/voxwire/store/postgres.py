"""PostgreSQL store for distributed mode (psycopg 3, one async connection pool).

It behaves like :class:`~voxwire.store.sqlite.SqliteStore`, message for message,
so the same contract tests run against both. What differs is storage:

- the schema comes from numbered files in ``migrations/`` (``0001_initial.sql``,
  ...), each applied in its own transaction and recorded in ``schema_migrations``
  with a checksum; a session-level advisory lock lets any number of processes
  start at once and exactly one of them apply what is missing;
- final segments are rows of ``segments`` (``sid``, ``idx``) as they arrive; the
  published transcript is one ``transcripts`` row: its segments as a JSONB
  array, its text, and a generated ``tsvector`` (GIN index) for full-text search
  when no OpenSearch is deployed. (Appending each final segment to the JSONB
  array instead rewrites the whole array every time: measured, 4,600 segments/s
  at 50 per session fell to 1,200/s at 500 per session.)
- :meth:`PostgresStore.record_messages` stores a batch in one transaction, in
  pipeline mode (two round trips): one ``INSERT ... ON CONFLICT DO NOTHING``
  for the log, then the new messages' effects folded into one statement per
  table. Concurrent relays recording the same ``(sid, seq)`` apply
  its effect exactly once (the second insert waits for the first and skips).

psycopg errors are translated to :class:`StoreError` where they leave this module.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import TypeAdapter

from voxwire.access import keys as auth
from voxwire.access.keys import NewKey
from voxwire.core.errors import StoreError
from voxwire.store.base import ApiKeyInfo, SessionRecord, Tenant
from voxwire_client.api import MatchData, PromptSpec
from voxwire_client.messages import (
    MESSAGE_ADAPTER,
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
    encode_message,
)

log = logging.getLogger(__name__)

_PROMPTS = TypeAdapter(tuple[PromptSpec, ...])
_SEGMENT_TUPLE = TypeAdapter(tuple[SegmentData, ...])
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_RETRIES = 3  # a batch that lost a deadlock is retried this many times in all
_LOST_TO_ANOTHER_WRITER = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.TransactionRollback,
)

Conn = AsyncConnection[DictRow]


# -- migrations ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations() -> list[Migration]:
    """The migration files shipped in ``voxwire/store/migrations``, by version."""
    found: list[Migration] = []
    for entry in (resources.files("voxwire.store") / "migrations").iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise StoreError(f"migration versions must run 1..n without gaps: {found!r}")
    return found


def _lock_key(schema: str | None) -> int:
    """A signed 64-bit advisory lock key for migrating ``schema``."""
    digest = hashlib.sha256(f"voxwire.migrations:{schema or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def _migrate(conn: Conn, schema: str | None) -> list[int]:
    """Apply the missing migrations under an advisory lock; the versions applied."""
    key = _lock_key(schema)
    await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        if schema:
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version, checksum FROM schema_migrations")
        applied = {int(r["version"]): str(r["checksum"]) for r in await cur.fetchall()}
        done: list[int] = []
        known = migrations()
        for migration in known:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    raise StoreError(
                        f"migration {migration.version:04d}_{migration.name} was changed "
                        "after it was applied",
                        hint="add a new migration file instead of editing an applied one",
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            log.info("applied migration %04d_%s", migration.version, migration.name)
            done.append(migration.version)
        newer = sorted(set(applied) - {m.version for m in known})
        if newer:
            log.warning("the database has migrations this voxwire does not know: %s", newer)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


# -- the store ----------------------------------------------------------------


class PostgresStore:
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
            raise StoreError(
                f"cannot connect to PostgreSQL within {timeout:g}s",
                hint="check VOXWIRE_POSTGRES_DSN and that the server is running",
            ) from exc
        store = cls(pool, schema)
        try:
            await store.migrate()
        except BaseException:
            await pool.close()
            raise
        return store

    async def migrate(self) -> list[int]:
        """Apply missing migrations (safe to call concurrently); the versions applied."""
        async with self._connection() as conn:
            return await _migrate(conn, self._schema)

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

    async def add_api_key(self, tenant_id: str, key: NewKey, label: str) -> ApiKeyInfo:
        created = datetime.now(UTC)
        await self._run(
            "INSERT INTO api_keys (id, tenant_id, digest, label, created_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (key.key_id, tenant_id, key.digest, label, created),
        )
        return ApiKeyInfo(key.key_id, tenant_id, label, created, None)

    async def list_api_keys(self) -> list[ApiKeyInfo]:
        rows = await self._all("SELECT * FROM api_keys ORDER BY created_at")
        return [
            ApiKeyInfo(r["id"], r["tenant_id"], r["label"], r["created_at"], r["revoked_at"])
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

    async def key_tenant(self, key_id: str) -> str | None:
        row = await self._one(
            "SELECT tenant_id FROM api_keys WHERE id = %s AND revoked_at IS NULL", (key_id,)
        )
        return str(row["tenant_id"]) if row else None

    async def tenant_id_for_key(self, plaintext: str) -> str | None:
        """The tenant of a valid key (for the broker's HTTP auth endpoint)."""
        tenant = await self.verify_api_key(plaintext)
        return tenant.id if tenant else None

    async def session_owner(self, sid: str) -> str | None:
        """The tenant owning ``sid`` (for the broker's HTTP ACL endpoint)."""
        row = await self._one("SELECT tenant_id FROM sessions WHERE sid = %s", (sid,))
        return str(row["tenant_id"]) if row else None

    # -- sessions -----------------------------------------------------------

    async def create_session(self, session: SessionRecord) -> None:
        await self._run(
            "INSERT INTO sessions (sid, tenant_id, status, created_at, filename, duration_ms, "
            "prompts) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)",
            (
                session.sid,
                session.tenant_id,
                session.status.value,
                session.created_at,
                session.filename,
                session.duration_ms,
                _PROMPTS.dump_json(session.prompts).decode(),
            ),
        )

    async def get_session(self, sid: str) -> SessionRecord | None:
        row = await self._one(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid WHERE s.sid = %s",
            (sid,),
        )
        return _session(row) if row else None

    async def list_sessions(self, tenant_id: str, limit: int = 100) -> list[SessionRecord]:
        rows = await self._all(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid "
            "WHERE s.tenant_id = %s ORDER BY s.created_at DESC LIMIT %s",
            (tenant_id, limit),
        )
        return [_session(r) for r in rows]

    async def all_sessions(self, after: str = "", limit: int = 500) -> list[SessionRecord]:
        rows = await self._all(
            "SELECT s.*, COALESCE(t.text, '') AS text FROM sessions s "
            "LEFT JOIN transcripts t ON t.sid = s.sid "
            "WHERE s.sid > %s ORDER BY s.sid LIMIT %s",
            (after, limit),
        )
        return [_session(r) for r in rows]

    async def count_sessions(self) -> int:
        row = await self._one("SELECT count(*) AS n FROM sessions")
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
                async with self._connection() as conn:
                    with contextlib.suppress(psycopg.errors.UniqueViolation):
                        async with conn.pipeline(), conn.transaction():
                            return await _record_new(conn, batch)
                    async with conn.pipeline(), conn.transaction():
                        return await _record(conn, batch)
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

    async def find_transcripts(self, tenant_id: str, query: str, limit: int = 20) -> list[str]:
        """Sids of ``tenant_id`` whose transcript matches ``query`` (web search syntax:
        words, ``"a phrase"``, ``-not``, ``or``; English stemming), best first."""
        rows = await self._all(
            "SELECT t.sid FROM transcripts t JOIN sessions s ON s.sid = t.sid, "
            "websearch_to_tsquery('english', %s) AS q "
            "WHERE s.tenant_id = %s AND t.tsv @@ q "
            "ORDER BY ts_rank(t.tsv, q) DESC, s.created_at DESC LIMIT %s",
            (query, tenant_id, limit),
        )
        return [str(r["sid"]) for r in rows]

    async def close(self) -> None:
        await self._pool.close()


# -- recording and folding ----------------------------------------------------

_INSERT_NEW_MESSAGES = (
    "INSERT INTO messages (sid, seq, type, payload) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[]::jsonb[])"
)
_INSERT_MESSAGES = _INSERT_NEW_MESSAGES + " ON CONFLICT (sid, seq) DO NOTHING RETURNING sid, seq"
_UPDATE_SESSIONS = (
    "UPDATE sessions s SET "
    "last_seq = GREATEST(s.last_seq, v.last_seq), "
    "status = COALESCE(v.status, s.status), "
    "percent = COALESCE(v.percent, s.percent), "
    "duration_ms = GREATEST(COALESCE(v.duration_ms, s.duration_ms), v.min_duration_ms), "
    "language = CASE WHEN v.has_language THEN v.language ELSE s.language END, "
    "error_code = COALESCE(v.error_code, s.error_code), "
    "error_message = CASE WHEN v.error_code IS NULL THEN s.error_message "
    "ELSE v.error_message END "
    "FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::float8[], %b::bigint[], "
    "%b::bigint[], %b::bool[], %b::text[], %b::text[], %b::text[]) "
    "AS v(sid, last_seq, status, percent, duration_ms, min_duration_ms, has_language, "
    "language, error_code, error_message) "
    "WHERE s.sid = v.sid"
)
_UPSERT_SEGMENTS = (
    "INSERT INTO segments (sid, idx, payload) "
    "SELECT * FROM unnest(%b::text[], %b::int[], %b::text[]::jsonb[]) "
    "ON CONFLICT (sid, idx) DO UPDATE SET payload = excluded.payload"
)
_UPSERT_MATCHES = (
    "INSERT INTO matches (sid, seq, payload) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[]::jsonb[]) "
    "ON CONFLICT (sid, seq) DO UPDATE SET payload = excluded.payload"
)
_UPSERT_TRANSCRIPTS = (
    "INSERT INTO transcripts (sid, segments, text) "
    "SELECT * FROM unnest(%b::text[], %b::text[]::jsonb[], %b::text[]) "
    "ON CONFLICT (sid) DO UPDATE SET segments = excluded.segments, text = excluded.text"
)


def _message_rows(batch: list[Message]) -> tuple[list[Any], ...]:
    rows = sorted(batch, key=lambda m: (m.sid, m.seq))  # one lock order for every writer
    return (
        [m.sid for m in rows],
        [m.seq for m in rows],
        [m.type for m in rows],
        [encode_message(m).decode() for m in rows],
    )


async def _record_new(conn: Conn, batch: list[Message]) -> int:
    """Insert and apply ``batch``, all of it new (inside a transaction, pipelined:
    nothing waits for an answer; a message stored before fails the transaction)."""
    await conn.execute(_INSERT_NEW_MESSAGES, _message_rows(batch))
    await _apply(conn, batch)
    return len(batch)


async def _record(conn: Conn, batch: list[Message]) -> int:
    """Insert the log rows of ``batch`` and apply the new ones (inside a transaction)."""
    cur = await conn.execute(_INSERT_MESSAGES, _message_rows(batch))
    inserted = {(r["sid"], r["seq"]) for r in await cur.fetchall()}
    if not inserted:
        return 0
    await _apply(conn, [m for m in batch if (m.sid, m.seq) in inserted])
    return len(inserted)


async def _apply(conn: Conn, messages: list[Message]) -> None:
    """The effects of ``messages``, folded into one statement per table (pipelined:
    sent with the COMMIT, in one round trip)."""
    fold = _BatchFold()
    for message in messages:
        fold.add(message)
    for statement, args in fold.statements():
        await conn.execute(statement, args)


@dataclass(slots=True)
class _SessionChange:
    """What a batch does to one ``sessions`` row (None: leaves the column as it is)."""

    last_seq: int = 0
    status: str | None = None
    percent: float | None = None
    duration_ms: int | None = None  # set by a transcript
    min_duration_ms: int | None = None  # raised by progress
    has_language: bool = False
    language: str | None = None
    error_code: str | None = None
    error_message: str | None = None


_CHANGE_FIELDS = tuple(f.name for f in fields(_SessionChange))


class _BatchFold:
    """A batch of new messages folded, in order, into one statement per table.

    The same effects as :func:`voxwire.store.sqlite._apply` applied message by
    message, in a handful of round trips instead of one per message.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, _SessionChange] = {}
        self.segments: dict[tuple[str, int], str] = {}
        self.matches: dict[tuple[str, int], str] = {}
        self.transcripts: dict[str, tuple[str, str]] = {}

    def add(self, message: Message) -> None:
        sid = message.sid
        change = self.sessions.setdefault(sid, _SessionChange())
        change.last_seq = max(change.last_seq, message.seq)
        if isinstance(message, ProgressMessage):
            change.status = message.status.value
            change.percent = message.percent
            if change.duration_ms is not None:
                change.duration_ms = max(change.duration_ms, message.duration_ms)
            else:
                change.min_duration_ms = max(change.min_duration_ms or 0, message.duration_ms)
        elif isinstance(message, SegmentMessage) and message.type == "final":
            segment = message.segment
            self.segments[(sid, segment.index)] = segment.model_dump_json()
        elif isinstance(message, MatchMessage):
            data = MatchData(**message.model_dump(include=set(MatchData.model_fields)))
            self.matches[(sid, message.seq)] = data.model_dump_json()
        elif isinstance(message, TranscriptMessage):
            segments = _SEGMENT_TUPLE.dump_json(message.segments).decode()
            self.transcripts[sid] = (segments, message.text)
            change.has_language, change.language = True, message.language
            change.duration_ms, change.min_duration_ms = message.duration_ms, None
        elif isinstance(message, ErrorMessage) and message.fatal:
            change.status = SessionStatus.FAILED.value
            change.error_code, change.error_message = message.code, message.message

    def statements(self) -> list[tuple[str, tuple[list[Any], ...]]]:
        changes = sorted(self.sessions.items())
        out: list[tuple[str, tuple[list[Any], ...]]] = [
            (
                _UPDATE_SESSIONS,
                (
                    [sid for sid, _ in changes],
                    *([getattr(c, name) for _, c in changes] for name in _CHANGE_FIELDS),
                ),
            )
        ]
        for statement, table in (
            (_UPSERT_SEGMENTS, self.segments),
            (_UPSERT_MATCHES, self.matches),
        ):
            if table:
                keys = sorted(table)
                out.append(
                    (
                        statement,
                        ([k[0] for k in keys], [k[1] for k in keys], [table[k] for k in keys]),
                    )
                )
        if self.transcripts:
            sids = sorted(self.transcripts)
            out.append(
                (
                    _UPSERT_TRANSCRIPTS,
                    (
                        sids,
                        [self.transcripts[sid][0] for sid in sids],
                        [self.transcripts[sid][1] for sid in sids],
                    ),
                )
            )
        return out


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
    )
