"""SQLite store for embedded mode (WAL, one connection guarded by a lock).

Calls are short and local, so they run on the event loop thread; the async
signatures match the PostgreSQL store of distributed mode. The two lookups the
broker's access checks make for every CONNECT and message
(:meth:`SqliteStore.key_grant`, :meth:`SqliteStore.session_owner`) run
on a thread of their own instead, so no access check queries on the event loop.

A database made by an older voxwire gets the columns added since
(:data:`ADDED_COLUMNS`) when opened; nothing in it is lost.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter

from voxwire.access import keys as auth
from voxwire.access.keys import KeyGrant, KeyRole, NewKey
from voxwire.access.owners import SessionOwner
from voxwire.store.base import (
    ApiKeyInfo,
    Reopened,
    SessionRecord,
    SessionState,
    Tenant,
    by_version,
)
from voxwire.store.sqlite_usage import SCHEMA as USAGE_SCHEMA
from voxwire.store.sqlite_usage import SqliteQuotas, meter
from voxwire.store.sqlite_webhooks import WEBHOOK_SCHEMA, SqliteWebhooks
from voxwire.store.usage import Metered, count_metered
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    MESSAGE_ADAPTER,
    ErrorMessage,
    MatchData,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
    encode_message,
)

_PROMPTS = TypeAdapter(tuple[PromptSpec, ...])

SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
    digest TEXT NOT NULL, label TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT,
    role TEXT NOT NULL DEFAULT 'tenant');
CREATE TABLE IF NOT EXISTS sessions (
    sid TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
    status TEXT NOT NULL, created_at TEXT NOT NULL, filename TEXT,
    duration_ms INTEGER NOT NULL DEFAULT 0, percent REAL NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0, prompts TEXT NOT NULL DEFAULT '[]',
    language TEXT, text TEXT NOT NULL DEFAULT '', error_code TEXT, error_message TEXT,
    key_id TEXT);
CREATE INDEX IF NOT EXISTS sessions_tenant ON sessions(tenant_id, created_at);
CREATE TABLE IF NOT EXISTS messages (
    sid TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (sid, seq));
CREATE TABLE IF NOT EXISTS segments (
    sid TEXT NOT NULL, idx INTEGER NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (sid, idx));
CREATE TABLE IF NOT EXISTS matches (
    sid TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (sid, seq));
"""

ADDED_COLUMNS = (
    ("api_keys", "role", "TEXT NOT NULL DEFAULT 'tenant'"),
    ("sessions", "key_id", "TEXT"),
    ("sessions", "version", "INTEGER NOT NULL DEFAULT 1"),
    ("sessions", "redact", "TEXT"),
    ("sessions", "deleted_at", "TEXT"),
    ("sessions", "deleted_reason", "TEXT"),
    ("sessions", "purged_at", "TEXT"),
    ("sessions", "kind", "TEXT"),
)
"""Columns added after the first schema: (table, column, definition)."""


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class SqliteStore(SqliteQuotas, SqliteWebhooks):
    def __init__(self, path: Path | str) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA secure_delete=ON")  # deleted content is overwritten
            self._db.executescript(SCHEMA)
            for table, column, definition in ADDED_COLUMNS:
                have = {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
            self._db.executescript(USAGE_SCHEMA)
            self._db.executescript(WEBHOOK_SCHEMA)
        self._lookups = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-access")

    def _one(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._db.execute(sql, args).fetchone()
            return row

    def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _run(self, sql: str, args: tuple[object, ...] = ()) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    # -- tenants and keys ---------------------------------------------------

    async def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id="t_" + secrets.token_hex(6), name=name, created_at=datetime.now(UTC))
        self._run(
            "INSERT INTO tenants VALUES (?, ?, ?)",
            (tenant.id, tenant.name, tenant.created_at.isoformat()),
        )
        return tenant

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        row = self._one("SELECT * FROM tenants WHERE id = ?", (tenant_id,))
        return _tenant(row) if row else None

    async def add_api_key(
        self, tenant_id: str, key: NewKey, label: str, role: KeyRole = "tenant"
    ) -> ApiKeyInfo:
        created = _now()
        self._run(
            "INSERT INTO api_keys (id, tenant_id, digest, label, created_at, role) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (key.key_id, tenant_id, key.digest, label, created, role),
        )
        return ApiKeyInfo(key.key_id, tenant_id, label, datetime.fromisoformat(created), None, role)

    async def list_api_keys(self) -> list[ApiKeyInfo]:
        rows = self._all("SELECT * FROM api_keys ORDER BY created_at")
        return [
            ApiKeyInfo(
                r["id"],
                r["tenant_id"],
                r["label"],
                datetime.fromisoformat(r["created_at"]),
                _time(r["revoked_at"]),
                r["role"],
            )
            for r in rows
        ]

    async def revoke_api_key(self, key_id: str) -> bool:
        changed = self._run(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (_now(), key_id),
        )
        return changed > 0

    async def verify_api_key(self, plaintext: str) -> Tenant | None:
        return self.tenant_for_key(plaintext)

    async def tenant_by_name(self, name: str) -> Tenant | None:
        row = self._one("SELECT * FROM tenants WHERE name = ? ORDER BY created_at", (name,))
        return _tenant(row) if row else None

    async def session_owner(self, sid: str) -> SessionOwner | None:
        row = await asyncio.get_running_loop().run_in_executor(
            self._lookups,
            self._one,
            "SELECT tenant_id, key_id FROM sessions WHERE sid = ? AND deleted_at IS NULL",
            (sid,),
        )
        return SessionOwner(row["tenant_id"], row["key_id"]) if row else None

    async def active_key(self, key_id: str) -> KeyGrant | None:
        row = self._one(
            "SELECT id, tenant_id, role FROM api_keys WHERE id = ? AND revoked_at IS NULL",
            (key_id,),
        )
        return _grant(row) if row else None

    async def key_issued(self, key_id: str) -> bool:
        return self._one("SELECT 1 FROM api_keys WHERE id = ?", (key_id,)) is not None

    async def key_grant(self, plaintext: str) -> KeyGrant | None:
        return await asyncio.get_running_loop().run_in_executor(
            self._lookups, self._grant_for_key, plaintext
        )

    def _grant_for_key(self, plaintext: str) -> KeyGrant | None:
        key_id = auth.key_id_of(plaintext)
        if key_id is None:
            return None
        row = self._one(
            "SELECT id, tenant_id, role, digest FROM api_keys WHERE id = ? AND revoked_at IS NULL",
            (key_id,),
        )
        if row is None or not auth.matches(plaintext, row["digest"]):
            return None
        return _grant(row)

    def tenant_for_key(self, plaintext: str) -> Tenant | None:
        key_id = auth.key_id_of(plaintext)
        if key_id is None:
            return None
        row = self._one(
            "SELECT t.*, k.digest FROM api_keys k JOIN tenants t ON t.id = k.tenant_id "
            "WHERE k.id = ? AND k.revoked_at IS NULL",
            (key_id,),
        )
        if row is None or not auth.matches(plaintext, row["digest"]):
            return None
        return _tenant(row)

    # -- sessions -----------------------------------------------------------

    async def create_session(
        self, session: SessionRecord, redact: RedactMode | None = None
    ) -> None:
        self._run(
            "INSERT INTO sessions (sid, tenant_id, status, created_at, filename, duration_ms, "
            "prompts, key_id, redact, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session.sid,
                session.tenant_id,
                session.status.value,
                session.created_at.isoformat(),
                session.filename,
                session.duration_ms,
                _PROMPTS.dump_json(session.prompts).decode(),
                session.key_id,
                redact.value if redact else None,
                session.kind,
            ),
        )

    async def get_session(self, sid: str) -> SessionRecord | None:
        row = self._one("SELECT * FROM sessions WHERE sid = ? AND deleted_at IS NULL", (sid,))
        return _session(row) if row else None

    async def list_sessions(self, tenant_id: str, limit: int = 100) -> list[SessionRecord]:
        rows = self._all(
            "SELECT * FROM sessions WHERE tenant_id = ? AND deleted_at IS NULL "
            "ORDER BY created_at DESC LIMIT ?",
            (tenant_id, limit),
        )
        return [_session(r) for r in rows]

    async def all_sessions(self, after: str = "", limit: int = 500) -> list[SessionRecord]:
        rows = self._all(
            "SELECT * FROM sessions WHERE sid > ? AND deleted_at IS NULL ORDER BY sid LIMIT ?",
            (after, limit),
        )
        return [_session(r) for r in rows]

    async def count_sessions(self) -> int:
        row = self._one("SELECT count(*) FROM sessions WHERE deleted_at IS NULL")
        return int(row[0]) if row else 0

    # -- messages -------------------------------------------------------------

    async def record_message(self, message: Message) -> bool:
        return await self.record_messages([message]) == 1

    async def record_messages(self, messages: list[Message]) -> int:
        """Store a batch in one transaction; returns how many were new."""
        new = 0
        metered: list[Metered] = []
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for message in messages:
                    inserted = db.execute(
                        "INSERT OR IGNORE INTO messages VALUES (?, ?, ?)",
                        (message.sid, message.seq, encode_message(message).decode()),
                    ).rowcount
                    if inserted:
                        db.execute(
                            "UPDATE sessions SET last_seq = MAX(last_seq, ?) WHERE sid = ?",
                            (message.seq, message.sid),
                        )
                        _apply(db, message)
                        if isinstance(message, TranscriptMessage):
                            metered += meter(db, message)
                        new += 1
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        count_metered(metered)
        return new

    async def messages_after(self, sid: str, after: int, limit: int = 1000) -> list[Message]:
        rows = self._all(
            "SELECT payload FROM messages WHERE sid = ? AND seq > ? ORDER BY seq LIMIT ?",
            (sid, after, limit),
        )
        return [MESSAGE_ADAPTER.validate_json(r["payload"]) for r in rows]

    async def segments(self, sid: str) -> list[SegmentData]:
        rows = self._all("SELECT payload FROM segments WHERE sid = ? ORDER BY idx", (sid,))
        return [SegmentData.model_validate_json(r["payload"]) for r in rows]

    async def matches(self, sid: str) -> list[MatchData]:
        rows = self._all("SELECT payload FROM matches WHERE sid = ? ORDER BY seq", (sid,))
        return [MatchData.model_validate_json(r["payload"]) for r in rows]

    async def reopen_session(self, sid: str) -> Reopened | None:
        rows = self._all(
            "UPDATE sessions SET status = 'queued', percent = 0, version = version + 1, "
            "error_code = NULL, error_message = NULL "
            "WHERE sid = ? AND status IN ('completed', 'failed') AND deleted_at IS NULL "
            "RETURNING *",
            (sid,),
        )
        if not rows:
            return None
        redact = rows[0]["redact"]
        return Reopened(_session(rows[0]), RedactMode(redact) if redact else None)

    async def transcript_versions(self, sid: str) -> list[TranscriptMessage]:
        rows = self._all(
            "SELECT payload FROM messages WHERE sid = ? "
            "AND json_extract(payload, '$.type') = 'transcript' ORDER BY seq",
            (sid,),
        )
        return by_version(TranscriptMessage.model_validate_json(r["payload"]) for r in rows)

    # -- deletion -------------------------------------------------------------

    async def session_state(self, sid: str) -> SessionState | None:
        row = self._one("SELECT * FROM sessions WHERE sid = ?", (sid,))
        if row is None:
            return None
        return SessionState(
            _session(row), _time(row["deleted_at"]), row["deleted_reason"], _time(row["purged_at"])
        )

    async def mark_deleted(self, sid: str, reason: str) -> bool:
        changed = self._run(
            "UPDATE sessions SET deleted_at = ?, deleted_reason = ? "
            "WHERE sid = ? AND deleted_at IS NULL",
            (_now(), reason, sid),
        )
        return changed > 0

    async def purge_session(self, sid: str) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("messages", "segments", "matches"):
                    db.execute(f"DELETE FROM {table} WHERE sid = ?", (sid,))  # noqa: S608
                db.execute(_BLANK_SESSION, (sid,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log's copies of its pages

    async def finish_deletion(self, sid: str) -> bool:
        changed = self._run(
            "UPDATE sessions SET purged_at = ? "
            "WHERE sid = ? AND deleted_at IS NOT NULL AND purged_at IS NULL",
            (_now(), sid),
        )
        return changed > 0

    async def unfinished_deletions(self, before: datetime, limit: int = 100) -> list[str]:
        rows = self._all(
            "SELECT sid FROM sessions WHERE deleted_at IS NOT NULL AND purged_at IS NULL "
            "AND deleted_at < ? ORDER BY deleted_at LIMIT ?",
            (before.astimezone(UTC).isoformat(), limit),
        )
        return [r["sid"] for r in rows]

    async def sessions_created_before(self, before: datetime, limit: int = 100) -> list[str]:
        rows = self._all(
            "SELECT sid FROM sessions WHERE deleted_at IS NULL AND created_at < ? "
            "ORDER BY created_at LIMIT ?",
            (before.astimezone(UTC).isoformat(), limit),
        )
        return [r["sid"] for r in rows]

    async def deleted_among(self, sids: Collection[str]) -> set[str]:
        wanted = list(sids)
        if not wanted:
            return set()
        marks = ",".join("?" * len(wanted))
        rows = self._all(
            f"SELECT sid FROM sessions WHERE deleted_at IS NOT NULL AND sid IN ({marks})",  # noqa: S608
            tuple(wanted),
        )
        return {r["sid"] for r in rows}

    async def ping(self) -> None:
        """Whether the database file answers a query (readiness)."""
        await asyncio.get_running_loop().run_in_executor(self._lookups, self._one, "SELECT 1")

    async def close(self) -> None:
        self._lookups.shutdown(wait=True)
        with self._lock:
            self._db.close()


_BLANK_SESSION = (
    "UPDATE sessions SET filename = NULL, text = '', prompts = '[]', language = NULL, "
    "error_code = NULL, error_message = NULL, percent = 0 WHERE sid = ?"
)
"""What a deleted session keeps: its sid, owner, times and state, not its content."""


def _apply(db: sqlite3.Connection, message: Message) -> None:
    """Fold one new message into the session's state."""
    sid = message.sid
    if isinstance(message, ProgressMessage):
        db.execute(
            "UPDATE sessions SET status = ?, percent = ?, duration_ms = MAX(duration_ms, ?) "
            "WHERE sid = ?",
            (message.status.value, message.percent, message.duration_ms, sid),
        )
    elif isinstance(message, SegmentMessage) and message.type == "final":
        if message.version > 1:  # a re-transcription's: current once its transcript is
            return
        db.execute(
            "INSERT OR REPLACE INTO segments VALUES (?, ?, ?)",
            (sid, message.segment.index, message.segment.model_dump_json()),
        )
    elif isinstance(message, MatchMessage):
        data = message.data()
        db.execute(
            "INSERT OR REPLACE INTO matches VALUES (?, ?, ?)",
            (sid, message.seq, data.model_dump_json()),
        )
    elif isinstance(message, TranscriptMessage):
        if message.version > 1:  # a re-transcription: its segments become the current ones
            db.execute("DELETE FROM segments WHERE sid = ?", (sid,))
            db.executemany(
                "INSERT INTO segments VALUES (?, ?, ?)",
                [(sid, s.index, s.model_dump_json()) for s in message.segments],
            )
        db.execute(
            "UPDATE sessions SET text = ?, language = ?, duration_ms = ? WHERE sid = ?",
            (message.text, message.language, message.duration_ms, sid),
        )
    elif isinstance(message, ErrorMessage) and message.fatal:
        db.execute(
            "UPDATE sessions SET status = ?, error_code = ?, error_message = ? WHERE sid = ?",
            (SessionStatus.FAILED.value, message.code, message.message, sid),
        )


def _tenant(row: sqlite3.Row) -> Tenant:
    return Tenant(
        id=row["id"], name=row["name"], created_at=datetime.fromisoformat(row["created_at"])
    )


def _session(row: sqlite3.Row) -> SessionRecord:
    return SessionRecord(
        sid=row["sid"],
        tenant_id=row["tenant_id"],
        status=SessionStatus(row["status"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        filename=row["filename"],
        duration_ms=row["duration_ms"],
        percent=row["percent"],
        last_seq=row["last_seq"],
        prompts=_PROMPTS.validate_json(row["prompts"]),
        language=row["language"],
        text=row["text"],
        error_code=row["error_code"],
        error_message=row["error_message"],
        key_id=row["key_id"],
        version=row["version"],
        kind=row["kind"] or ("file" if row["filename"] else "live"),
    )


def _grant(row: sqlite3.Row) -> KeyGrant:
    return KeyGrant(key_id=row["id"], tenant_id=row["tenant_id"], role=row["role"])
