"""Webhook deliveries and secrets in the PostgreSQL store
(:class:`~voxwire.store.webhooks.WebhookStore`; tables of migration
``0006_webhooks.sql``): :class:`PostgresWebhooks` is a part of
:class:`~voxwire.store.postgres.PostgresStore`. Several gateways claim at once:
the claim locks the rows it takes and skips those another claim holds
(``FOR UPDATE SKIP LOCKED``), so a due delivery goes to one gateway."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime

from psycopg.rows import DictRow

from voxwire.store.postgres_writes import Conn
from voxwire.store.webhooks import Delivery, DeliveryState, NewDelivery, new_secret

_CLAIM = """
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, lease = gen_random_uuid()::text, leased_until = %(until)s
WHERE d.id IN (
    SELECT w.id FROM webhook_deliveries w JOIN sessions s ON s.sid = w.sid
    WHERE w.state = 'pending' AND w.next_attempt_at <= %(now)s
      AND (w.leased_until IS NULL OR w.leased_until <= %(now)s)
      AND s.status IN ('completed', 'failed') AND s.deleted_at IS NULL
    ORDER BY w.next_attempt_at LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED)
RETURNING d.*
"""
_KEEP = (
    "INSERT INTO webhook_secrets (key_id, secret, created_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (key_id) DO NOTHING"
)
_ROTATE = (
    "INSERT INTO webhook_secrets (key_id, secret, created_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (key_id) DO UPDATE SET secret = EXCLUDED.secret, created_at = EXCLUDED.created_at"
)


class PostgresWebhooks:
    """The webhook methods of the PostgreSQL store (its connections)."""

    _connection: Callable[[], AbstractAsyncContextManager[Conn]]

    async def add_delivery(self, delivery: NewDelivery) -> None:
        async with self._connection() as conn:
            await conn.execute(
                "INSERT INTO webhook_deliveries (id, sid, key_id, url, next_attempt_at, "
                "created_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    delivery.id,
                    delivery.sid,
                    delivery.key_id,
                    delivery.url,
                    delivery.created_at,
                    delivery.created_at,
                    delivery.expires_at,
                ),
            )

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int = 20
    ) -> list[Delivery]:
        async with self._connection() as conn:
            cur = await conn.execute(_CLAIM, {"now": now, "until": lease_until, "limit": limit})
            rows = await cur.fetchall()
        return sorted((_delivery(r) for r in rows), key=lambda d: d.next_attempt_at)

    async def finish_delivery(
        self,
        delivery: Delivery,
        state: DeliveryState,
        *,
        at: datetime,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        async with self._connection() as conn:
            cur = await conn.execute(
                "UPDATE webhook_deliveries SET state = %s, last_error = %s, "
                "next_attempt_at = COALESCE(%s, next_attempt_at), delivered_at = %s, "
                "lease = NULL, leased_until = NULL WHERE id = %s AND lease = %s",
                (
                    state.value,
                    error,
                    next_attempt_at,
                    at if state is DeliveryState.DELIVERED else None,
                    delivery.id,
                    delivery.lease,
                ),
            )
            return cur.rowcount > 0

    async def expire_deliveries(self, now: datetime) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                "UPDATE webhook_deliveries SET state = 'expired', lease = NULL, "
                "leased_until = NULL WHERE state = 'pending' AND expires_at <= %(now)s "
                "AND (leased_until IS NULL OR leased_until <= %(now)s)",
                {"now": now},
            )
            return cur.rowcount

    async def pending_deliveries(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) AS n FROM webhook_deliveries WHERE state = 'pending'"
            )
            row = await cur.fetchone()
        return int(row["n"]) if row else 0

    async def deliveries_of(self, sid: str) -> list[Delivery]:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT * FROM webhook_deliveries WHERE sid = %s ORDER BY created_at, id", (sid,)
            )
            rows = await cur.fetchall()
        return [_delivery(r) for r in rows]

    async def drop_deliveries(self, sid: str) -> None:
        async with self._connection() as conn:
            await conn.execute("DELETE FROM webhook_deliveries WHERE sid = %s", (sid,))

    async def webhook_secret(self, key_id: str, *, rotate: bool = False) -> str:
        async with self._connection() as conn:
            await conn.execute(
                _ROTATE if rotate else _KEEP, (key_id, new_secret(), datetime.now(UTC))
            )
            cur = await conn.execute(
                "SELECT secret FROM webhook_secrets WHERE key_id = %s", (key_id,)
            )
            row = await cur.fetchone()
        assert row is not None  # inserted just before
        return str(row["secret"])


def _delivery(row: DictRow) -> Delivery:
    return Delivery(
        id=row["id"],
        sid=row["sid"],
        key_id=row["key_id"],
        url=row["url"],
        state=DeliveryState(row["state"]),
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        last_error=row["last_error"],
        delivered_at=row["delivered_at"],
        lease=row["lease"],
    )
