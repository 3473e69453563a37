"""The delivery loop on a real SQLite store and a real local receiver: a 2xx is
delivered, a 5xx is retried later, a host no longer allowed at delivery time is
refused, an old delivery expires, and a failed session's failure is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evaluation.ports import free_port
from tests.webhook_receiver import Receiver
from voxwire.core.config import Settings
from voxwire.gateway.webhook_sender import RoundReport, WebhookSender
from voxwire.store import SessionRecord, SqliteStore
from voxwire.store.webhooks import DeliveryState, NewDelivery
from voxwire_client.messages import ErrorMessage, ProgressMessage, SessionStatus
from voxwire_client.webhooks import SIGNATURE_HEADER, verify

ALLOW_LOOPBACK = Settings(webhook_allow=("127.0.0.1",), webhook_retry_s=60)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "db.sqlite3")
    yield opened
    await opened.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(free_port()).start()
    yield running
    running.stop()


async def _finished_session(store: SqliteStore, sid: str, *, failed: bool = False) -> None:
    tenant = await store.create_tenant(f"t-{sid}")
    now = datetime.now(UTC)
    await store.create_session(SessionRecord(sid, tenant.id, SessionStatus.QUEUED, now, "a.wav"))
    if failed:
        message = ErrorMessage(sid=sid, seq=2, code="engine", message="it broke", fatal=True)
    else:
        message = ProgressMessage(sid=sid, seq=2, status=SessionStatus.COMPLETED, percent=100)
    await store.record_message(message)


async def _delivery(store: SqliteStore, sid: str, url: str, ttl: timedelta) -> None:
    now = datetime.now(UTC)
    await store.add_delivery(NewDelivery(f"wh_{sid}", sid, "k1", url, now, now + ttl))


async def test_a_failed_session_is_delivered_signed(store: SqliteStore, receiver: Receiver) -> None:
    await _finished_session(store, "s_failed", failed=True)
    await _delivery(store, "s_failed", receiver.url, timedelta(hours=1))
    report = await WebhookSender(store, ALLOW_LOOPBACK).round()
    assert report == RoundReport(delivered=1)
    (hit,) = receiver.hits
    event = verify(await store.webhook_secret("k1"), hit.headers[SIGNATURE_HEADER], hit.body)
    assert (event.event, event.status, event.error_code, event.error_message) == (
        "session.failed",
        "failed",
        "engine",
        "it broke",
    )
    assert hit.headers["Host"] == f"127.0.0.1:{receiver.port}"


async def test_a_server_error_is_retried_later(store: SqliteStore, receiver: Receiver) -> None:
    receiver.status = 503
    await _finished_session(store, "s_a")
    await _delivery(store, "s_a", receiver.url, timedelta(hours=1))
    sender = WebhookSender(store, ALLOW_LOOPBACK, jitter=lambda: 1.0)
    before = datetime.now(UTC)
    assert await sender.round() == RoundReport(retried=1)
    assert await sender.round() == RoundReport()  # not due yet
    (waiting,) = await store.deliveries_of("s_a")
    assert waiting.state is DeliveryState.PENDING and waiting.last_error is not None
    assert "HTTP 503" in waiting.last_error
    assert waiting.next_attempt_at >= before + timedelta(seconds=60)
    receiver.status = 204
    assert await sender.round(waiting.next_attempt_at) == RoundReport(delivered=1)
    assert len(receiver.hits) == 2


async def test_a_host_no_longer_allowed_is_refused_at_delivery(
    store: SqliteStore, receiver: Receiver
) -> None:
    await _finished_session(store, "s_a")
    await _delivery(store, "s_a", receiver.url, timedelta(hours=1))
    report = await WebhookSender(store, Settings()).round()
    assert report == RoundReport(refused=1) and receiver.hits == []
    (refused,) = await store.deliveries_of("s_a")
    assert refused.state is DeliveryState.REFUSED and "loopback" in (refused.last_error or "")


async def test_a_delivery_that_cannot_be_made_in_time_expires(store: SqliteStore) -> None:
    await _finished_session(store, "s_a")
    await _finished_session(store, "s_b")
    down = f"http://127.0.0.1:{free_port()}/hook"
    await _delivery(store, "s_a", down, timedelta(seconds=30))  # its retry comes too late
    await _delivery(store, "s_b", down, timedelta(seconds=-1))  # expired already
    report = await WebhookSender(store, ALLOW_LOOPBACK).round()
    assert report == RoundReport(expired=2)
    states = [d.state for sid in ("s_a", "s_b") for d in await store.deliveries_of(sid)]
    assert states == [DeliveryState.EXPIRED, DeliveryState.EXPIRED]
    assert await store.pending_deliveries() == 0
