"""Webhook deliveries and secrets in the embedded SQLite store
(:class:`~voxwire.store.webhooks.WebhookStore`): :data:`WEBHOOK_SCHEMA` is applied
when the store opens, and :class:`SqliteWebhooks` is a part of
:class:`~voxwire.store.sqlite.SqliteStore`. One process uses the database, and
every statement runs under the store's lock, so a claim is one ``UPDATE ...
RETURNING``."""

from __future__ import annotations

import secrets
import sqlite3
import threading
from datetime import UTC, datetime

from voxwire.store.webhooks import Delivery, DeliveryState, NewDelivery, new_secret

WEBHOOK_SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id TEXT PRIMARY KEY, sid TEXT NOT NULL, key_id TEXT NOT NULL, url TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
    last_error TEXT, delivered_at TEXT, lease TEXT, leased_until TEXT);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due
    ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_sid ON webhook_deliveries (sid);
CREATE TABLE IF NOT EXISTS webhook_secrets (
    key_id TEXT PRIMARY KEY, secret TEXT NOT NULL, created_at TEXT NOT NULL);
"""

_CLAIM = """
UPDATE webhook_deliveries SET attempts = attempts + 1, lease = ?, leased_until = ?
WHERE id = ? RETURNING *
"""
_DUE = """
SELECT d.id FROM webhook_deliveries d JOIN sessions s ON s.sid = d.sid
WHERE d.state = 'pending' AND d.next_attempt_at <= ?
  AND (d.leased_until IS NULL OR d.leased_until <= ?)
  AND s.status IN ('completed', 'failed') AND s.deleted_at IS NULL
ORDER BY d.next_attempt_at LIMIT ?
"""


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


class SqliteWebhooks:
    """The webhook methods of the SQLite store (its connection and lock)."""

    _db: sqlite3.Connection
    _lock: threading.Lock

    async def add_delivery(self, delivery: NewDelivery) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO webhook_deliveries (id, sid, key_id, url, next_attempt_at, "
                "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    delivery.id,
                    delivery.sid,
                    delivery.key_id,
                    delivery.url,
                    _iso(delivery.created_at),
                    _iso(delivery.created_at),
                    _iso(delivery.expires_at),
                ),
            )

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int = 20
    ) -> list[Delivery]:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                due = db.execute(_DUE, (_iso(now), _iso(now), limit)).fetchall()
                rows = [
                    db.execute(
                        _CLAIM, (secrets.token_hex(8), _iso(lease_until), r["id"])
                    ).fetchone()
                    for r in due
                ]
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return [_delivery(r) for r in rows]

    async def finish_delivery(
        self,
        delivery: Delivery,
        state: DeliveryState,
        *,
        at: datetime,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        with self._lock:
            changed = self._db.execute(
                "UPDATE webhook_deliveries SET state = ?, last_error = ?, "
                "next_attempt_at = COALESCE(?, next_attempt_at), delivered_at = ?, "
                "lease = NULL, leased_until = NULL WHERE id = ? AND lease = ?",
                (
                    state.value,
                    error,
                    _iso(next_attempt_at) if next_attempt_at else None,
                    _iso(at) if state is DeliveryState.DELIVERED else None,
                    delivery.id,
                    delivery.lease,
                ),
            ).rowcount
        return changed > 0

    async def expire_deliveries(self, now: datetime) -> int:
        with self._lock:
            return self._db.execute(
                "UPDATE webhook_deliveries SET state = 'expired', lease = NULL, "
                "leased_until = NULL WHERE state = 'pending' AND expires_at <= ? "
                "AND (leased_until IS NULL OR leased_until <= ?)",
                (_iso(now), _iso(now)),
            ).rowcount

    async def pending_deliveries(self) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'"
            ).fetchone()
        return int(row[0])

    async def deliveries_of(self, sid: str) -> list[Delivery]:
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM webhook_deliveries WHERE sid = ? ORDER BY created_at, id", (sid,)
            ).fetchall()
        return [_delivery(r) for r in rows]

    async def drop_deliveries(self, sid: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM webhook_deliveries WHERE sid = ?", (sid,))

    async def webhook_secret(self, key_id: str, *, rotate: bool = False) -> str:
        fresh = new_secret()
        with self._lock:
            verb = "REPLACE" if rotate else "IGNORE"
            self._db.execute(
                f"INSERT OR {verb} INTO webhook_secrets VALUES (?, ?, ?)",  # noqa: S608
                (key_id, fresh, _iso(datetime.now(UTC))),
            )
            row = self._db.execute(
                "SELECT secret FROM webhook_secrets WHERE key_id = ?", (key_id,)
            ).fetchone()
        return str(row["secret"])


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _delivery(row: sqlite3.Row) -> Delivery:
    return Delivery(
        id=row["id"],
        sid=row["sid"],
        key_id=row["key_id"],
        url=row["url"],
        state=DeliveryState(row["state"]),
        attempts=row["attempts"],
        next_attempt_at=datetime.fromisoformat(row["next_attempt_at"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        expires_at=datetime.fromisoformat(row["expires_at"]),
        last_error=row["last_error"],
        delivered_at=_time(row["delivered_at"]),
        lease=row["lease"],
    )
