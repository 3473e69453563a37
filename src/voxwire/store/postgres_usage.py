"""Quotas and usage in the PostgreSQL store (:mod:`voxwire.store.usage` says what
they are; the tables come from migration ``0007_usage_quotas``).

:class:`PostgresQuotas` is a part of :class:`~voxwire.store.postgres.PostgresStore`;
:data:`INSERT_USAGE` writes the usage rows of a batch's transcripts inside the
batch's transaction (:mod:`voxwire.store.postgres_writes`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from psycopg.rows import DictRow

from voxwire.access.quotas import QuotaName, Use
from voxwire.store.base import QuotaSetting, Tenant, UsageRow
from voxwire.store.usage import FILE_JOBS_SQL, KIND_SQL, LIVE_SQL, month_of

INSERT_USAGE = (
    "INSERT INTO usage (sid, version, tenant_id, key_id, model, kind, day, audio_ms) "  # noqa: S608
    "SELECT s.sid, v.version, s.tenant_id, s.key_id, v.model, "
    f"CASE WHEN v.version > 1 THEN 'retranscription' ELSE {KIND_SQL} END, v.day, v.audio_ms "
    "FROM unnest(%b::text[], %b::int[], %b::text[], %b::text[]::date[], %b::bigint[]) "
    "AS v(sid, version, model, day, audio_ms) JOIN sessions s ON s.sid = v.sid "
    "ORDER BY s.sid, v.version "
    "ON CONFLICT (sid, version) DO NOTHING RETURNING tenant_id, kind, audio_ms"
)


class PostgresQuotas:
    """The quota and usage methods of the PostgreSQL store."""

    if TYPE_CHECKING:

        async def _one(self, query: Any, args: Sequence[object] = ()) -> DictRow | None: ...
        async def _all(self, query: Any, args: Sequence[object] = ()) -> list[DictRow]: ...
        async def _run(self, query: Any, args: Sequence[object] = ()) -> int: ...

    async def list_tenants(self) -> list[Tenant]:
        rows = await self._all("SELECT * FROM tenants ORDER BY created_at")
        return [Tenant(r["id"], r["name"], r["created_at"]) for r in rows]

    async def set_quota(
        self, tenant_id: str, key_id: str | None, name: QuotaName, value: int
    ) -> None:
        await self._run(
            "INSERT INTO quotas (tenant_id, key_id, name, value) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, key_id, name) "
            "DO UPDATE SET value = excluded.value, updated_at = now()",
            (tenant_id, key_id or "", name, value),
        )

    async def clear_quotas(
        self, tenant_id: str, key_id: str | None, names: Collection[QuotaName] = ()
    ) -> int:
        return await self._run(
            "DELETE FROM quotas WHERE tenant_id = %s AND key_id = %s "
            "AND (cardinality(%s::text[]) = 0 OR name = ANY(%s::text[]))",
            (tenant_id, key_id or "", list(names), list(names)),
        )

    async def quotas(self, tenant_id: str) -> list[QuotaSetting]:
        rows = await self._all(
            "SELECT * FROM quotas WHERE tenant_id = %s ORDER BY key_id, name", (tenant_id,)
        )
        return [QuotaSetting(tenant_id, r["key_id"] or None, r["name"], r["value"]) for r in rows]

    async def quota_use(self, tenant_id: str, key_id: str | None, today: date) -> Use:
        owner = "tenant_id = %s" + (" AND key_id = %s" if key_id else "")
        args: tuple[object, ...] = (tenant_id, key_id) if key_id else (tenant_id,)
        counts = await self._one(
            f"SELECT count(*) FILTER (WHERE {LIVE_SQL}) AS live, "  # noqa: S608
            f"count(*) FILTER (WHERE {FILE_JOBS_SQL}) AS jobs FROM sessions "
            f"WHERE {owner} AND deleted_at IS NULL AND status IN ('queued', 'transcribing')",
            args,
        )
        audio = await self._one(
            "SELECT coalesce(sum(audio_ms) FILTER (WHERE day = %s), 0) AS today, "  # noqa: S608
            f"coalesce(sum(audio_ms), 0) AS month FROM usage WHERE {owner} AND day >= %s",
            (today, *args, month_of(today)),
        )
        assert counts is not None and audio is not None
        return Use(
            live_streams=int(counts["live"]),
            uploads_in_flight=int(counts["jobs"]),
            audio_seconds_today=int(audio["today"]) / 1000,
            audio_seconds_month=int(audio["month"]) / 1000,
        )

    async def usage(self, tenant_id: str | None, since: date, until: date) -> list[UsageRow]:
        rows = await self._all(
            "SELECT day, tenant_id, key_id, model, kind, sum(audio_ms) AS ms, "
            "count(*) AS sessions FROM usage "
            "WHERE (%s::text IS NULL OR tenant_id = %s::text) AND day BETWEEN %s AND %s "
            "GROUP BY day, tenant_id, key_id, model, kind "
            "ORDER BY day, tenant_id, key_id, model, kind",
            (tenant_id, tenant_id, since, until),
        )
        return [
            UsageRow(
                r["day"],
                r["tenant_id"],
                r["key_id"],
                r["model"],
                r["kind"],
                int(r["ms"]) / 1000,
                int(r["sessions"]),
            )
            for r in rows
        ]
