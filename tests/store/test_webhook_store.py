"""Webhook deliveries and secrets in both stores (SQLite and PostgreSQL): a
delivery is due only once its session is finished, a claim leases it to one
caller, only the lease's holder records an outcome, and expiry, deletion and
secrets behave the same in both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.store import postgres_store
from voxwire.store import SessionRecord, SqliteStore, Store
from voxwire.store.webhooks import DeliveryState, NewDelivery
from voxwire_client.messages import ErrorMessage, ProgressMessage, SessionStatus

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "db.sqlite3")
        yield sqlite
        await sqlite.close()
        return
    async with postgres_store() as pg:
        yield pg


async def _session(store: Store, sid: str) -> None:
    tenant = await store.create_tenant(f"t-{sid}")
    session = SessionRecord(sid, tenant.id, SessionStatus.QUEUED, T0, filename="a.wav")
    await store.create_session(session)


async def _finish(store: Store, sid: str, failed: bool = False) -> None:
    if failed:
        await store.record_message(
            ErrorMessage(sid=sid, seq=2, code="audio", message="no audio", fatal=True)
        )
    else:
        progress = ProgressMessage(sid=sid, seq=2, status=SessionStatus.COMPLETED, percent=100)
        await store.record_message(progress)


def _delivery(sid: str, n: int = 1, ttl_h: float = 24) -> NewDelivery:
    return NewDelivery(
        f"wh_{sid}_{n}", sid, "k1", "https://hooks.example/x", T0, T0 + timedelta(hours=ttl_h)
    )


async def test_a_delivery_is_due_once_its_session_is_finished(store: Store) -> None:
    await _session(store, "s_a")
    await _session(store, "s_b")
    await store.add_delivery(_delivery("s_a"))
    await store.add_delivery(_delivery("s_b"))
    lease = T0 + timedelta(minutes=1)
    assert await store.claim_deliveries(T0, lease) == []
    assert await store.pending_deliveries() == 2
    await _finish(store, "s_a")
    await _finish(store, "s_b", failed=True)
    claimed = await store.claim_deliveries(T0, lease)
    assert sorted(d.sid for d in claimed) == ["s_a", "s_b"]
    assert all(d.attempts == 1 and d.lease for d in claimed)
    assert await store.claim_deliveries(T0, lease) == []  # leased


async def test_only_the_lease_holder_records_the_outcome(store: Store) -> None:
    await _session(store, "s_a")
    await store.add_delivery(_delivery("s_a"))
    await _finish(store, "s_a")
    (first,) = await store.claim_deliveries(T0, T0 + timedelta(seconds=30))
    # the first claimant stalls past its lease: another claims it again
    (second,) = await store.claim_deliveries(T0 + timedelta(seconds=31), T0 + timedelta(minutes=2))
    assert second.id == first.id and second.attempts == 2 and second.lease != first.lease
    assert not await store.finish_delivery(first, DeliveryState.DELIVERED, at=T0)
    later = T0 + timedelta(minutes=5)
    assert await store.finish_delivery(
        second, DeliveryState.PENDING, at=T0, error="HTTP 503", next_attempt_at=later
    )
    (kept,) = await store.deliveries_of("s_a")
    assert (kept.state, kept.last_error, kept.next_attempt_at, kept.lease) == (
        DeliveryState.PENDING,
        "HTTP 503",
        later,
        None,
    )
    assert await store.claim_deliveries(later - timedelta(seconds=1), later) == []
    (third,) = await store.claim_deliveries(later, later + timedelta(seconds=30))
    assert await store.finish_delivery(third, DeliveryState.DELIVERED, at=later)
    (done,) = await store.deliveries_of("s_a")
    assert done.state is DeliveryState.DELIVERED and done.delivered_at == later
    assert done.attempts == 3 and await store.pending_deliveries() == 0
    assert await store.claim_deliveries(later + timedelta(days=1), later + timedelta(days=2)) == []


async def test_concurrent_claims_hand_each_delivery_out_once(store: Store) -> None:
    for i in range(12):
        await _session(store, f"s_{i}")
        await store.add_delivery(_delivery(f"s_{i}"))
        await _finish(store, f"s_{i}")
    lease = T0 + timedelta(minutes=1)
    batches = await asyncio.gather(*(store.claim_deliveries(T0, lease, 5) for _ in range(4)))
    ids = [d.id for batch in batches for d in batch]
    assert len(ids) == 12 and len(set(ids)) == 12


async def test_deliveries_expire_and_deleted_sessions_drop_theirs(store: Store) -> None:
    await _session(store, "s_a")
    await _session(store, "s_b")
    await store.add_delivery(_delivery("s_a", ttl_h=1))
    await store.add_delivery(_delivery("s_b", ttl_h=1))
    assert await store.expire_deliveries(T0 + timedelta(minutes=59)) == 0
    await store.drop_deliveries("s_b")
    assert await store.deliveries_of("s_b") == []
    assert await store.expire_deliveries(T0 + timedelta(hours=1)) == 1
    (expired,) = await store.deliveries_of("s_a")
    assert expired.state is DeliveryState.EXPIRED
    await _finish(store, "s_a")
    assert await store.claim_deliveries(T0 + timedelta(hours=2), T0 + timedelta(hours=3)) == []


async def test_a_tombstoned_session_is_not_delivered(store: Store) -> None:
    await _session(store, "s_a")
    await store.add_delivery(_delivery("s_a"))
    await _finish(store, "s_a")
    assert await store.mark_deleted("s_a", "request")
    assert await store.claim_deliveries(T0, T0 + timedelta(minutes=1)) == []


async def test_a_key_keeps_its_secret_until_rotated(store: Store) -> None:
    first = await store.webhook_secret("k1")
    assert first.startswith("whsec_") and len(first) > 40
    assert await store.webhook_secret("k1") == first
    assert await store.webhook_secret("k2") != first
    rotated = await store.webhook_secret("k1", rotate=True)
    assert rotated != first and await store.webhook_secret("k1") == rotated
