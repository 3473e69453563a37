"""The Store contract, run against every implementation (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.broker.conftest import PahoClient
from tests.store import fresh_schema, pg_query, postgres_store
from voxwire.access.keys import KeyGrant, generate_key
from voxwire.access.owners import SessionOwner
from voxwire.access.tokens import issuer_for
from voxwire.core.config import Settings
from voxwire.platform.brokers import embedded_broker
from voxwire.store import SessionRecord, SqliteStore, Store
from voxwire_client.api import PromptSpec
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
    WordData,
)

pytestmark = pytest.mark.timeout(60)


@dataclass
class Backend:
    """A store under test, with a way to read back everything it wrote, raw."""

    store: Store
    raw: Callable[[], Awaitable[bytes]]


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "db.sqlite3"
        sqlite = SqliteStore(path)

        async def sqlite_raw() -> bytes:
            return b"".join(p.read_bytes() for p in tmp_path.glob("db.sqlite3*"))

        yield Backend(sqlite, sqlite_raw)
        await sqlite.close()
        return
    schema = fresh_schema()
    async with postgres_store(schema) as pg:

        async def pg_raw() -> bytes:
            rows: list[tuple[Any, ...]] = []
            for table in ("tenants", "api_keys", "sessions", "messages", "transcripts"):
                rows += await pg_query(schema, f"SELECT t::text FROM {table} t")
            return "\n".join(str(r[0]) for r in rows).encode()

        yield Backend(pg, pg_raw)


async def _session(
    store: Store,
    sid: str,
    tenant_id: str,
    *,
    filename: str | None = None,
    duration_ms: int = 0,
    prompts: tuple[PromptSpec, ...] = (),
) -> SessionRecord:
    session = SessionRecord(
        sid=sid,
        tenant_id=tenant_id,
        status=SessionStatus.QUEUED,
        created_at=datetime.now(UTC),
        filename=filename,
        duration_ms=duration_ms,
        prompts=prompts,
    )
    await store.create_session(session)
    return session


def _seg(sid: str, index: int, text: str) -> SegmentData:
    return SegmentData(
        id=f"{sid}-{index}",
        index=index,
        start_ms=index * 1000,
        end_ms=index * 1000 + 900,
        text=text,
    )


async def test_keys_are_hashed_and_revocable(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "test")
    assert (await store.verify_api_key(key.plaintext)) == tenant
    assert await store.active_key(key.key_id) == KeyGrant(key.key_id, tenant.id, "tenant")
    assert await store.active_key("00000000") is None
    assert await store.key_issued(key.key_id) and not await store.key_issued("00000000")
    assert await store.verify_api_key(key.plaintext + "x") is None
    assert await store.verify_api_key("garbage") is None
    raw = await backend.raw()
    assert key.digest.encode() in raw
    assert key.plaintext.encode() not in raw
    assert [k.id for k in await store.list_api_keys()] == [key.key_id]
    assert await store.revoke_api_key(key.key_id)
    assert await store.verify_api_key(key.plaintext) is None
    assert await store.active_key(key.key_id) is None
    assert await store.key_issued(key.key_id)
    assert not await store.revoke_api_key(key.key_id)
    (info,) = await store.list_api_keys()
    assert info.revoked_at is not None and info.tenant_id == tenant.id


async def test_the_brokers_lookups(backend: Backend) -> None:
    """What access checks ask: what a key acts as, the owner of a session."""
    store = backend.store
    acme, other = await store.create_tenant("acme"), await store.create_tenant("other")
    key = generate_key()
    await store.add_api_key(acme.id, key, "test")
    await _session(store, "s_acme", acme.id)
    await _session(store, "s_other", other.id)
    assert await store.key_grant(key.plaintext) == KeyGrant(key.key_id, acme.id, "tenant")
    for wrong in (key.plaintext + "x", "vxk_nope", "garbage", ""):
        assert await store.key_grant(wrong) is None, wrong
    assert await store.session_owner("s_acme") == SessionOwner(acme.id)
    assert await store.session_owner("s_other") == SessionOwner(other.id)
    assert await store.session_owner("s_nobody") is None
    assert await store.revoke_api_key(key.key_id)
    assert await store.key_grant(key.plaintext) is None


async def test_a_device_key_and_the_sessions_it_opens(backend: Backend) -> None:
    """A key's role is stored and listed; a session records the key that opened it."""
    store = backend.store
    acme = await store.create_tenant("acme")
    device, tenant_key = generate_key(), generate_key()
    info = await store.add_api_key(acme.id, device, "kitchen-mic", "device")
    await store.add_api_key(acme.id, tenant_key, "app")
    assert (info.role, info.label) == ("device", "kitchen-mic")
    assert {k.id: k.role for k in await store.list_api_keys()} == {
        device.key_id: "device",
        tenant_key.key_id: "tenant",
    }
    grant = await store.key_grant(device.plaintext)
    assert grant == KeyGrant(device.key_id, acme.id, "device") and grant.device
    assert await store.active_key(device.key_id) == grant
    await store.create_session(
        SessionRecord(
            sid="s_dev",
            tenant_id=acme.id,
            status=SessionStatus.QUEUED,
            created_at=datetime.now(UTC),
            key_id=device.key_id,
        )
    )
    assert await store.session_owner("s_dev") == SessionOwner(acme.id, device.key_id)
    found = await store.get_session("s_dev")
    assert found is not None and found.key_id == device.key_id
    assert found.owner == SessionOwner(acme.id, device.key_id)
    assert await store.revoke_api_key(device.key_id)
    assert await store.key_grant(device.plaintext) is None


async def test_tenants_by_id_and_name(backend: Backend) -> None:
    store = backend.store
    first = await store.create_tenant("acme")
    await store.create_tenant("acme")
    assert await store.get_tenant(first.id) == first
    assert await store.tenant_by_name("acme") == first
    assert await store.get_tenant("t_nope") is None
    assert await store.tenant_by_name("nope") is None


async def test_message_log_is_idempotent_and_folds_state(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")
    await _session(store, "s1", tenant.id)
    words = (
        WordData(word="hello", start_ms=0, end_ms=400, probability=0.93),
        WordData(word="there", start_ms=450, end_ms=900, probability=0.71),
    )  # with the speaker, kept as they are by every store
    seg = SegmentData(
        id="s1-0", index=0, start_ms=0, end_ms=900, text="hello there", speaker="S1", words=words
    )
    messages: list[Message] = [
        ProgressMessage(
            sid="s1", seq=1, status=SessionStatus.TRANSCRIBING, percent=0, duration_ms=1000
        ),
        SegmentMessage(sid="s1", seq=2, type="final", segment=seg),
        MatchMessage(
            sid="s1",
            seq=3,
            prompt_id="p1",
            prompt="hello",
            score=1,
            start_ms=0,
            end_ms=400,
            text="hello",
            highlight="<em>hello</em> there",
            segment_ids=("s1-0",),
            speaker="S1",
        ),
        TranscriptMessage(sid="s1", seq=4, text="hello there", duration_ms=1000, segments=(seg,)),
        ProgressMessage(
            sid="s1", seq=5, status=SessionStatus.COMPLETED, percent=100, duration_ms=1000
        ),
    ]
    assert all([await store.record_message(m) for m in messages])
    assert not await store.record_message(messages[1])  # redelivery
    session = await store.get_session("s1")
    assert session is not None
    assert (session.status, session.percent, session.last_seq) == (SessionStatus.COMPLETED, 100, 5)
    assert session.text == "hello there"
    assert await store.segments("s1") == [seg]
    assert [(m.prompt_id, m.speaker) for m in await store.matches("s1")] == [("p1", "S1")]
    assert [m.seq for m in await store.messages_after("s1", 2)] == [3, 4, 5]
    assert await store.messages_after("s1", 0) == messages
    assert [m.seq for m in await store.messages_after("s1", 0, limit=2)] == [1, 2]


async def test_fatal_error_fails_the_session(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")
    await _session(store, "s2", tenant.id)
    await store.record_message(ErrorMessage(sid="s2", seq=1, code="audio_empty", message="empty"))
    await store.record_message(
        ErrorMessage(sid="s2", seq=2, code="slow", message="behind", fatal=False)
    )
    session = await store.get_session("s2")
    assert session is not None and session.status is SessionStatus.FAILED
    assert (session.error_code, session.error_message, session.last_seq) == (
        "audio_empty",
        "empty",
        2,
    )
    assert (
        await store.session_owner("s2") == SessionOwner(tenant.id)
        and await store.session_owner("nope") is None
    )


async def test_record_messages_batch_is_idempotent(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")
    await _session(store, "b1", tenant.id)
    await _session(store, "b2", tenant.id)
    batch: list[Message] = []
    for sid in ("b1", "b2"):
        batch += [
            ProgressMessage(sid=sid, seq=1, status=SessionStatus.TRANSCRIBING, percent=10),
            SegmentMessage(sid=sid, seq=2, type="final", segment=_seg(sid, 0, "one")),
            SegmentMessage(sid=sid, seq=3, type="partial", segment=_seg(sid, 1, "tw")),
            SegmentMessage(sid=sid, seq=4, type="final", segment=_seg(sid, 1, "two")),
        ]
    assert await store.record_messages(batch + batch[:2]) == 8  # repeats inside the batch
    assert await store.record_messages(batch) == 0  # the batch redelivered
    assert await store.record_messages([]) == 0
    more: list[Message] = [
        ProgressMessage(sid="b1", seq=5, status=SessionStatus.COMPLETED, percent=100)
    ]
    assert await store.record_messages(batch[:3] + more) == 1
    b1, b2 = await store.get_session("b1"), await store.get_session("b2")
    assert b1 is not None and b2 is not None
    assert (b1.status, b1.percent, b1.last_seq) == (SessionStatus.COMPLETED, 100, 5)
    assert (b2.status, b2.percent, b2.last_seq) == (SessionStatus.TRANSCRIBING, 10, 4)
    assert [s.text for s in await store.segments("b2")] == ["one", "two"]
    assert [m.seq for m in await store.messages_after("b1", 0)] == [1, 2, 3, 4, 5]


async def test_a_batch_has_the_effect_of_its_messages_one_by_one(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")

    def story(sid: str) -> list[Message]:
        return [
            ProgressMessage(sid=sid, seq=1, status=SessionStatus.TRANSCRIBING, percent=20,
                            duration_ms=4000),
            SegmentMessage(sid=sid, seq=2, type="final", segment=_seg(sid, 0, "one")),
            MatchMessage(sid=sid, seq=3, prompt_id="p", prompt="one", score=1.0, start_ms=0,
                         end_ms=900, text="one", highlight="<em>one</em>", segment_ids=("0",)),
            SegmentMessage(sid=sid, seq=4, type="final", segment=_seg(sid, 0, "won")),
            TranscriptMessage(sid=sid, seq=5, text="won", language="en", duration_ms=3900,
                              segments=(_seg(sid, 0, "won"),)),
            ProgressMessage(sid=sid, seq=6, status=SessionStatus.TRANSCRIBING, percent=90,
                            duration_ms=3000),
            ErrorMessage(sid=sid, seq=7, code="engine", message="it broke", fatal=True),
        ]  # fmt: skip

    for sid in ("whole", "single"):
        await _session(store, sid, tenant.id)
    assert await store.record_messages(story("whole")) == 7
    for message in story("single"):
        assert await store.record_message(message)
    whole, single = await store.get_session("whole"), await store.get_session("single")
    assert whole is not None and single is not None
    assert whole.status == SessionStatus.FAILED and whole.error_message == "it broke"
    assert (whole.percent, whole.duration_ms, whole.language) == (90, 3900, "en")
    assert whole == replace(single, sid="whole", created_at=whole.created_at)
    assert [s.text for s in await store.segments("whole")] == ["won"]
    assert [m.text for m in await store.matches("whole")] == ["one"]


async def test_final_segments_replace_by_index_in_order(backend: Backend) -> None:
    store = backend.store
    tenant = await store.create_tenant("acme")
    await _session(store, "o1", tenant.id)
    order = [(1, 2, "b"), (2, 0, "a"), (3, 3, "d"), (4, 2, "c"), (5, 0, "A")]
    await store.record_messages(
        [
            SegmentMessage(sid="o1", seq=seq, type="final", segment=_seg("o1", idx, text))
            for seq, idx, text in order
        ]
    )
    assert [(s.index, s.text) for s in await store.segments("o1")] == [(0, "A"), (2, "c"), (3, "d")]
    assert await store.segments("nope") == []
    assert await store.matches("nope") == []


async def test_messages_without_a_session_are_logged(backend: Backend) -> None:
    store = backend.store
    message = ProgressMessage(sid="ghost", seq=1, status=SessionStatus.TRANSCRIBING, percent=1)
    assert await store.record_message(message)
    assert await store.messages_after("ghost", 0) == [message]
    assert await store.get_session("ghost") is None


async def test_sessions_round_trip_and_list_newest_first(backend: Backend) -> None:
    store = backend.store
    acme, other = await store.create_tenant("acme"), await store.create_tenant("other")
    prompts = (PromptSpec(id="p1", text="budget"), PromptSpec(id="p2", text="ok", speaker="S2"))
    old = await _session(store, "l1", acme.id, filename="a.wav", duration_ms=5, prompts=prompts)
    new = SessionRecord(
        sid="l2", tenant_id=acme.id, status=SessionStatus.QUEUED,
        created_at=old.created_at + timedelta(seconds=1),
    )  # fmt: skip
    await store.create_session(new)
    await _session(store, "l3", other.id)
    assert await store.get_session("l1") == old
    assert [s.sid for s in await store.list_sessions(acme.id)] == ["l2", "l1"]
    assert [s.sid for s in await store.list_sessions(acme.id, limit=1)] == ["l2"]
    assert await store.get_session("nope") is None
    # every tenant's sessions, by sid, a page at a time (reindexing walks them)
    assert [s.sid for s in await store.all_sessions()] == ["l1", "l2", "l3"]
    assert [s.sid for s in await store.all_sessions(limit=2)] == ["l1", "l2"]
    assert [s.sid for s in await store.all_sessions(after="l2")] == ["l3"]
    assert await store.count_sessions() == 3


async def test_the_embedded_broker_runs_on_this_store(backend: Backend, tmp_path: Path) -> None:
    """The broker's access checks are the store's async lookups: any store serves it."""
    store = backend.store
    acme, other = await store.create_tenant("acme"), await store.create_tenant("other")
    key = generate_key()
    await store.add_api_key(acme.id, key, "test")
    await _session(store, "s_mine", acme.id)
    await _session(store, "s_theirs", other.id)
    settings = Settings(http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path)
    tokens = issuer_for("", tmp_path)
    broker = embedded_broker(settings, store, "service-secret", tokens)
    await broker.start()
    client = PahoClient(broker.tcp_port, "device-1", key.key_id, key.plaintext)
    try:
        assert not (await asyncio.to_thread(client.connect)).is_failure
        granted = await asyncio.to_thread(client.subscribe, "transcription/s_mine/+")
        refused = await asyncio.to_thread(client.subscribe, "transcription/s_theirs/+")
        assert (granted, refused) == ([1], [0x80])
    finally:
        await asyncio.to_thread(client.close)
        await broker.stop()
