"""HotState against a real Redis: TTLs, folding of messages, the active sessions."""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from tests.store import redis_url, require
from voxwire.store import SessionRecord
from voxwire.store.hot import HotSession, HotState, HotStateError
from voxwire_client.messages import (
    ErrorMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
)

pytestmark = pytest.mark.timeout(30)

TTL_S = 600


@pytest.fixture
def prefix() -> str:
    return "vxtest" + secrets.token_hex(4)


@pytest.fixture
async def raw(prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the same Redis; removes the test's keys afterwards."""
    require("redis")
    client = aioredis.from_url(redis_url(), decode_responses=True, socket_timeout=5)
    yield client
    keys = [k async for k in client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.fixture
async def hot(raw: aioredis.Redis, prefix: str) -> AsyncIterator[HotState]:
    state = HotState.open(redis_url(), ttl_s=TTL_S, prefix=prefix)
    yield state
    await state.close()


def _progress(sid: str, seq: int, status: SessionStatus, percent: float) -> ProgressMessage:
    return ProgressMessage(sid=sid, seq=seq, status=status, percent=percent)


def _session(sid: str, tenant_id: str) -> SessionRecord:
    return SessionRecord(
        sid=sid, tenant_id=tenant_id, status=SessionStatus.QUEUED, created_at=datetime.now(UTC)
    )


async def test_updates_set_status_and_a_ttl(hot: HotState, raw: aioredis.Redis) -> None:
    assert await hot.get("h1") is None
    await hot.track(_session("h1", "t1"))
    got = await hot.get("h1")
    assert got is not None
    assert (got.status, got.percent, got.last_seq, got.tenant_id) == (
        SessionStatus.QUEUED, 0.0, 0, "t1",
    )  # fmt: skip
    await hot.apply(_progress("h1", 1, SessionStatus.TRANSCRIBING, 12.5))
    segment = SegmentData(id="h1-0", index=0, start_ms=0, end_ms=5, text="hi")
    await hot.apply(SegmentMessage(sid="h1", seq=2, type="final", segment=segment))
    got = await hot.get("h1")
    assert got == HotSession(
        sid="h1",
        status=SessionStatus.TRANSCRIBING,
        percent=12.5,
        last_seq=2,
        tenant_id="t1",
        updated_ms=got.updated_ms if got else 0,
    )
    ttl = await raw.ttl(hot.session_key("h1"))
    assert 0 < ttl <= TTL_S


async def test_an_update_refreshes_the_ttl(hot: HotState, raw: aioredis.Redis) -> None:
    await hot.apply(_progress("h2", 1, SessionStatus.TRANSCRIBING, 1))
    key = hot.session_key("h2")
    await raw.expire(key, 5)
    assert await raw.ttl(key) <= 5
    await hot.apply(_progress("h2", 2, SessionStatus.TRANSCRIBING, 2))
    assert await raw.ttl(key) > TTL_S - 5


async def test_redeliveries_and_stale_statuses_change_nothing(hot: HotState) -> None:
    done = _progress("h3", 5, SessionStatus.COMPLETED, 100)
    await hot.apply(done)
    await hot.apply(_progress("h3", 3, SessionStatus.TRANSCRIBING, 60))  # late, older
    await hot.apply(done)  # redelivered
    got = await hot.get("h3")
    assert got is not None
    assert (got.status, got.percent, got.last_seq) == (SessionStatus.COMPLETED, 100, 5)
    await hot.apply(ErrorMessage(sid="h3", seq=6, code="slow", message="late", fatal=False))
    got = await hot.get("h3")
    assert got is not None and (got.status, got.last_seq) == (SessionStatus.COMPLETED, 6)


async def test_active_sessions_per_tenant(hot: HotState, raw: aioredis.Redis) -> None:
    await hot.track(_session("a1", "t1"))
    await hot.track(_session("a2", "t1"))
    await hot.track(_session("b1", "t2"))
    await asyncio.sleep(0.01)  # scores are milliseconds: make the order unambiguous
    await hot.apply(_progress("a1", 1, SessionStatus.TRANSCRIBING, 10))
    assert await hot.active("t1") == ["a1", "a2"]
    assert await hot.active("t2") == ["b1"]
    assert 0 < await raw.ttl(hot.active_key("t1")) <= TTL_S
    await hot.apply(_progress("a1", 2, SessionStatus.COMPLETED, 100))
    assert await hot.active("t1") == ["a2"]
    await hot.apply(ErrorMessage(sid="a2", seq=1, code="audio_empty", message="empty"))
    assert await hot.active("t1") == []
    got = await hot.get("a2")
    assert got is not None and got.status is SessionStatus.FAILED
    await hot.forget("b1")
    assert await hot.get("b1") is None and await hot.active("t2") == []


async def test_a_message_can_name_the_tenant(hot: HotState) -> None:
    await hot.apply(_progress("m1", 1, SessionStatus.TRANSCRIBING, 3), tenant_id="t9")
    got = await hot.get("m1")
    assert got is not None and got.tenant_id == "t9"
    assert await hot.active("t9") == ["m1"]


async def test_an_unreachable_redis_raises_hot_state_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = HotState.open(f"redis://127.0.0.1:{port}/0", timeout=1)
    try:
        with pytest.raises(HotStateError, match="Redis"):
            await state.get("x")
    finally:
        await state.close()


async def test_apply_many_folds_a_batch_in_order(hot: HotState) -> None:
    batch = [
        _progress("p1", 1, SessionStatus.TRANSCRIBING, 10),
        _progress("p2", 1, SessionStatus.TRANSCRIBING, 20),
        _progress("p1", 2, SessionStatus.COMPLETED, 100),
        _progress("p1", 2, SessionStatus.COMPLETED, 100),  # a repeat inside the batch
        _progress("p2", 2, SessionStatus.TRANSCRIBING, 30),
    ]
    await hot.apply_many(batch, tenant_id="t5")
    await hot.apply_many([])
    p1, p2 = await hot.get("p1"), await hot.get("p2")
    assert p1 is not None and p2 is not None
    assert (p1.status, p1.percent, p1.last_seq) == (SessionStatus.COMPLETED, 100, 2)
    assert (p2.status, p2.percent, p2.last_seq) == (SessionStatus.TRANSCRIBING, 30, 2)
    assert await hot.active("t5") == ["p2"]


async def test_apply_many_matches_applying_one_by_one(hot: HotState) -> None:
    def story(sid: str) -> list[Message]:
        return [
            _progress(sid, 5, SessionStatus.TRANSCRIBING, 50),
            _progress(sid, 3, SessionStatus.TRANSCRIBING, 30),  # late: changes nothing
            ErrorMessage(sid=sid, seq=6, code="engine", message="broke", fatal=True),
            SegmentMessage(sid=sid, seq=8, type="final", segment=SegmentData(
                id=f"{sid}-0", index=0, start_ms=0, end_ms=1, text="x")),
            _progress(sid, 4, SessionStatus.TRANSCRIBING, 40),  # older than the failure
        ]  # fmt: skip

    await hot.apply_many(story("m1"), tenant_id="t6")
    for message in story("m2"):
        await hot.apply(message, tenant_id="t6")
    m1, m2 = await hot.get("m1"), await hot.get("m2")
    assert m1 is not None and m2 is not None
    assert (m1.status, m1.percent, m1.last_seq) == (SessionStatus.FAILED, 50, 8)
    assert (m2.status, m2.percent, m2.last_seq) == (m1.status, m1.percent, m1.last_seq)
