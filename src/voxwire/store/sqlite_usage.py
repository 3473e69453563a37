"""Quotas and usage in the SQLite store (:mod:`voxwire.store.usage` says what they are).

:class:`SqliteQuotas` is a part of :class:`~voxwire.store.sqlite.SqliteStore`;
:func:`meter` writes a transcript's usage row inside the store's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from voxwire.access.quotas import QuotaName, Use
from voxwire.store.base import QuotaSetting, Tenant, UsageRow
from voxwire.store.usage import FILE_JOBS_SQL, KIND_SQL, LIVE_SQL, Metered, month_of, usage_values
from voxwire_client.messages import TranscriptMessage

SCHEMA = """
CREATE TABLE IF NOT EXISTS quotas (
    tenant_id TEXT NOT NULL REFERENCES tenants(id), key_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL, value INTEGER NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key_id, name));
CREATE TABLE IF NOT EXISTS usage (
    sid TEXT NOT NULL, version INTEGER NOT NULL, tenant_id TEXT NOT NULL, key_id TEXT,
    model TEXT NOT NULL, kind TEXT NOT NULL, day TEXT NOT NULL, audio_ms INTEGER NOT NULL,
    recorded_at TEXT NOT NULL, PRIMARY KEY (sid, version));
CREATE INDEX IF NOT EXISTS usage_tenant_day ON usage (tenant_id, day);
CREATE INDEX IF NOT EXISTS sessions_under_way ON sessions (tenant_id)
    WHERE status IN ('queued', 'transcribing');
"""
"""Run after the sessions' added columns exist."""

_METER = (
    "INSERT OR IGNORE INTO usage "  # noqa: S608
    "(sid, version, tenant_id, key_id, model, kind, day, audio_ms, recorded_at) "
    f"SELECT sid, ?, tenant_id, key_id, ?, CASE WHEN ? > 1 THEN 'retranscription' "
    f"ELSE {KIND_SQL} END, ?, ?, ? FROM sessions WHERE sid = ? "
    "RETURNING tenant_id, kind, audio_ms"
)


def meter(db: sqlite3.Connection, message: TranscriptMessage) -> list[Metered]:
    """Write the usage row of a stored transcript, if absent (inside a transaction)."""
    version, model, day, audio_ms = usage_values(message)
    now = datetime.now(UTC).isoformat()
    rows = db.execute(_METER, (version, model, version, day, audio_ms, now, message.sid)).fetchall()
    return [Metered(r["tenant_id"], r["kind"], r["audio_ms"]) for r in rows]


class SqliteQuotas:
    """The quota and usage methods of the SQLite store."""

    if TYPE_CHECKING:

        def _one(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Row | None: ...
        def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[sqlite3.Row]: ...
        def _run(self, sql: str, args: tuple[object, ...] = ()) -> int: ...

    async def list_tenants(self) -> list[Tenant]:
        rows = self._all("SELECT * FROM tenants ORDER BY created_at")
        return [Tenant(r["id"], r["name"], datetime.fromisoformat(r["created_at"])) for r in rows]

    async def set_quota(
        self, tenant_id: str, key_id: str | None, name: QuotaName, value: int
    ) -> None:
        self._run(
            "INSERT INTO quotas VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, key_id, name) "
            "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (tenant_id, key_id or "", name, value, datetime.now(UTC).isoformat()),
        )

    async def clear_quotas(
        self, tenant_id: str, key_id: str | None, names: Collection[QuotaName] = ()
    ) -> int:
        if not names:
            return self._run(
                "DELETE FROM quotas WHERE tenant_id = ? AND key_id = ?", (tenant_id, key_id or "")
            )
        marks = ",".join("?" * len(names))
        return self._run(
            f"DELETE FROM quotas WHERE tenant_id = ? AND key_id = ? AND name IN ({marks})",  # noqa: S608
            (tenant_id, key_id or "", *names),
        )

    async def quotas(self, tenant_id: str) -> list[QuotaSetting]:
        rows = self._all(
            "SELECT * FROM quotas WHERE tenant_id = ? ORDER BY key_id, name", (tenant_id,)
        )
        return [QuotaSetting(tenant_id, r["key_id"] or None, r["name"], r["value"]) for r in rows]

    async def quota_use(self, tenant_id: str, key_id: str | None, today: date) -> Use:
        owner = "tenant_id = ?" + (" AND key_id = ?" if key_id else "")
        args: tuple[object, ...] = (tenant_id, key_id) if key_id else (tenant_id,)
        counts = self._one(
            f"SELECT coalesce(sum({LIVE_SQL}), 0) AS live, "  # noqa: S608
            f"coalesce(sum({FILE_JOBS_SQL}), 0) AS jobs FROM sessions "
            f"WHERE {owner} AND deleted_at IS NULL AND status IN ('queued', 'transcribing')",
            args,
        )
        audio = self._one(
            "SELECT coalesce(sum(CASE WHEN day = ? THEN audio_ms END), 0) AS today, "  # noqa: S608
            f"coalesce(sum(audio_ms), 0) AS month FROM usage WHERE {owner} AND day >= ?",
            (today.isoformat(), *args, month_of(today).isoformat()),
        )
        assert counts is not None and audio is not None
        return Use(
            live_streams=int(counts["live"]),
            uploads_in_flight=int(counts["jobs"]),
            audio_seconds_today=audio["today"] / 1000,
            audio_seconds_month=audio["month"] / 1000,
        )

    async def usage(self, tenant_id: str | None, since: date, until: date) -> list[UsageRow]:
        rows = self._all(
            "SELECT day, tenant_id, key_id, model, kind, sum(audio_ms) AS ms, "
            "count(*) AS sessions FROM usage WHERE (? IS NULL OR tenant_id = ?) "
            "AND day >= ? AND day <= ? GROUP BY day, tenant_id, key_id, model, kind "
            "ORDER BY day, tenant_id, key_id, model, kind",
            (tenant_id, tenant_id, since.isoformat(), until.isoformat()),
        )
        return [
            UsageRow(
                date.fromisoformat(r["day"]),
                r["tenant_id"],
                r["key_id"],
                r["model"],
                r["kind"],
                r["ms"] / 1000,
                r["sessions"],
            )
            for r in rows
        ]
