"""What only the PostgreSQL store does: migrations, its transcript rows, concurrent writers."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime

import pytest

from tests.store import (
    drop_schema,
    fresh_schema,
    pg_query,
    postgres_dsn,
    postgres_store,
    require,
)
from voxwire.access.keys import KeyGrant, generate_key
from voxwire.access.owners import SessionOwner
from voxwire.core.errors import StoreError
from voxwire.store import SessionRecord
from voxwire.store.postgres import PostgresStore
from voxwire.store.postgres_migrations import migrations
from voxwire_client.messages import (
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)

pytestmark = pytest.mark.timeout(60)


def _session(sid: str, tenant_id: str) -> SessionRecord:
    return SessionRecord(
        sid=sid, tenant_id=tenant_id, status=SessionStatus.QUEUED, created_at=datetime.now(UTC)
    )


def _transcript(sid: str, seq: int, text: str) -> TranscriptMessage:
    segment = SegmentData(id=f"{sid}-0", index=0, start_ms=0, end_ms=1000, text=text)
    return TranscriptMessage(sid=sid, seq=seq, text=text, duration_ms=1000, segments=(segment,))


async def test_migrations_are_recorded_once_and_idempotent() -> None:
    schema = fresh_schema()
    async with postgres_store(schema) as store:
        assert await store.migrate() == []
        again = await PostgresStore.open(postgres_dsn(), schema=schema, timeout=5)
        await again.close()
        rows = await pg_query(schema, "SELECT version, name FROM schema_migrations ORDER BY 1")
        assert rows == [(m.version, m.name) for m in migrations()]
        assert rows[0] == (1, "initial")


async def test_concurrent_starts_apply_migrations_once() -> None:
    schema = fresh_schema()
    require("postgres")
    stores = await asyncio.gather(
        *(PostgresStore.open(postgres_dsn(), schema=schema, timeout=10) for _ in range(6))
    )
    try:
        rows = await pg_query(schema, "SELECT count(*) FROM schema_migrations")
        assert rows == [(len(migrations()),)]
        tenant = await stores[0].create_tenant("acme")
        assert await stores[-1].get_tenant(tenant.id) == tenant
    finally:
        await asyncio.gather(*(s.close() for s in stores))
        await drop_schema(schema)


async def test_an_edited_applied_migration_is_refused() -> None:
    schema = fresh_schema()
    async with postgres_store(schema):
        await pg_query(schema, "UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
        with pytest.raises(StoreError, match="was changed after it was applied"):
            await PostgresStore.open(postgres_dsn(), schema=schema, timeout=5)


async def test_a_transcript_row_holds_its_segments_and_text_and_no_tsvector() -> None:
    schema = fresh_schema()
    async with postgres_store(schema) as store:
        acme = await store.create_tenant("acme")
        await store.create_session(_session("t2", acme.id))
        await store.record_messages([_transcript("t2", 1, "A dog runs; quarterly budgets")])
        published = await pg_query(
            schema, "SELECT segments->0->>'text', text FROM transcripts WHERE sid = 't2'"
        )
        assert published == [("A dog runs; quarterly budgets", "A dog runs; quarterly budgets")]
        columns = await pg_query(
            schema,
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'transcripts' ORDER BY 1",
            schema,
        )
        assert columns == [("segments",), ("sid",), ("text",)]
        indexes = await pg_query(
            schema,
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'transcripts'",
            schema,
        )
        assert indexes == [("transcripts_pkey",)]


async def test_concurrent_writers_apply_each_message_once() -> None:
    schema = fresh_schema()
    async with postgres_store(schema) as store:
        tenant = await store.create_tenant("acme")
        sids = [f"c{i}" for i in range(4)]
        for sid in sids:
            await store.create_session(_session(sid, tenant.id))
        batch: list[Message] = []
        for sid in sids:
            batch += [
                SegmentMessage(
                    sid=sid,
                    seq=i + 1,
                    type="final",
                    segment=SegmentData(
                        id=f"{sid}-{i}", index=i, start_ms=i, end_ms=i + 1, text=f"w{i}"
                    ),
                )
                for i in range(20)
            ]
        other = await PostgresStore.open(postgres_dsn(), schema=schema, timeout=5)
        try:
            counts = await asyncio.gather(
                *(s.record_messages(batch[::-1] if n % 2 else batch)
                  for n, s in enumerate([store, other, store, other]))
            )  # fmt: skip
        finally:
            await other.close()
        assert sum(counts) == len(batch)
        for sid in sids:
            assert [s.index for s in await store.segments(sid)] == list(range(20))
            session = await store.get_session(sid)
            assert session is not None and session.last_seq == 20


async def test_lookups_for_the_broker_auth_endpoint() -> None:
    async with postgres_store() as store:
        tenant = await store.create_tenant("acme")
        key = generate_key()
        await store.add_api_key(tenant.id, key, "device")
        await store.create_session(_session("a1", tenant.id))
        assert await store.key_grant(key.plaintext) == KeyGrant(key.key_id, tenant.id)
        assert await store.key_grant("vxk_nope") is None
        assert await store.session_owner("a1") == SessionOwner(tenant.id)
        assert await store.session_owner("a2") is None


async def test_progress_keeps_the_longest_duration() -> None:
    async with postgres_store() as store:
        tenant = await store.create_tenant("acme")
        await store.create_session(_session("d1", tenant.id))
        await store.record_messages(
            [
                ProgressMessage(sid="d1", seq=1, status=SessionStatus.TRANSCRIBING, percent=5,
                                duration_ms=9000),
                ProgressMessage(sid="d1", seq=2, status=SessionStatus.TRANSCRIBING, percent=50,
                                duration_ms=100),
            ]
        )  # fmt: skip
        session = await store.get_session("d1")
        assert session is not None and (session.duration_ms, session.percent) == (9000, 50)


async def test_a_server_that_is_not_there_raises_store_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError, match="cannot connect"):
        await PostgresStore.open(f"postgresql://x:y@127.0.0.1:{port}/x", timeout=1)


async def test_bad_schema_names_are_refused() -> None:
    with pytest.raises(StoreError, match="invalid schema name"):
        await PostgresStore.open("postgresql://x@127.0.0.1:1/x", schema="a; DROP TABLE x")
