from datetime import UTC, datetime
from pathlib import Path

import pytest

from voxwire.auth import generate_key
from voxwire.store import SessionRecord, SqliteStore
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)


@pytest.fixture
async def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "db.sqlite3")


async def test_keys_are_hashed_and_revocable(store: SqliteStore, tmp_path: Path) -> None:
    tenant = await store.create_tenant("acme")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "test")
    assert (await store.verify_api_key(key.plaintext)) == tenant
    assert await store.verify_api_key(key.plaintext + "x") is None
    assert await store.verify_api_key("garbage") is None
    assert key.plaintext.encode() not in (tmp_path / "db.sqlite3").read_bytes()
    assert await store.revoke_api_key(key.key_id)
    assert await store.verify_api_key(key.plaintext) is None
    assert not await store.revoke_api_key(key.key_id)


async def test_message_log_is_idempotent_and_folds_state(store: SqliteStore) -> None:
    tenant = await store.create_tenant("acme")
    await store.create_session(
        SessionRecord(
            sid="s1", tenant_id=tenant.id, status=SessionStatus.QUEUED, created_at=datetime.now(UTC)
        )
    )
    seg = SegmentData(id="s1-0", index=0, start_ms=0, end_ms=900, text="hello there")
    messages = [
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
    assert [m.prompt_id for m in await store.matches("s1")] == ["p1"]
    assert [m.seq for m in await store.messages_after("s1", 2)] == [3, 4, 5]


async def test_fatal_error_fails_the_session(store: SqliteStore) -> None:
    tenant = await store.create_tenant("acme")
    await store.create_session(
        SessionRecord(
            sid="s2", tenant_id=tenant.id, status=SessionStatus.QUEUED, created_at=datetime.now(UTC)
        )
    )
    await store.record_message(ErrorMessage(sid="s2", seq=1, code="audio_empty", message="empty"))
    session = await store.get_session("s2")
    assert session is not None and session.status is SessionStatus.FAILED
    assert session.error_code == "audio_empty"
    assert store.session_owner("s2") == tenant.id and store.session_owner("nope") is None
