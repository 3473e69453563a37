"""Quotas and usage in both stores: quotas set, read and cleared per tenant and key;
the use a quota is held against (sessions under way, audio of the day and month);
usage rows written with the transcript, once per session version, even when the
same transcript is stored twice (a job run again after a crash) under another seq."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tests.store import fresh_schema, postgres_store
from voxwire.access.keys import generate_key
from voxwire.access.quotas import Use
from voxwire.core.metrics import USAGE_AUDIO_SECONDS
from voxwire.store import SessionRecord, SqliteStore, Store
from voxwire.store.base import SessionKind
from voxwire_client.messages import ProgressMessage, SessionStatus, TranscriptMessage

pytestmark = pytest.mark.timeout(60)
KINDS = pytest.mark.parametrize("kind", ["sqlite", "postgres"])


@asynccontextmanager
async def _store(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    if kind == "postgres":
        async with postgres_store(fresh_schema()) as store:
            yield store
        return
    sqlite = SqliteStore(tmp_path / "store.sqlite3")
    try:
        yield sqlite
    finally:
        await sqlite.close()


async def _session(
    store: Store, sid: str, tenant_id: str, kind: SessionKind, key_id: str | None = None
) -> None:
    await store.create_session(
        SessionRecord(
            sid=sid,
            tenant_id=tenant_id,
            status=SessionStatus.QUEUED,
            created_at=datetime.now(UTC),
            filename="a.wav" if kind == "file" else None,
            key_id=key_id,
            kind=kind,
        )
    )


def _transcript(
    sid: str, seq: int, ms: int, *, version: int = 1, model: str = "tiny.en", day: date
) -> TranscriptMessage:
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    return TranscriptMessage(
        sid=sid, seq=seq, ts=at, version=version, text="hi", duration_ms=ms, segments=(),
        model=model,
    )  # fmt: skip


def _counted(tenant_id: str, kind: str) -> float:
    return USAGE_AUDIO_SECONDS.labels(tenant=tenant_id, kind=kind)._value.get()


@KINDS
async def test_quotas_per_tenant_and_key(kind: str, tmp_path: Path) -> None:
    async with _store(kind, tmp_path) as store:
        tenant = await store.create_tenant("acme")
        other = await store.create_tenant("other")
        assert await store.quotas(tenant.id) == []
        await store.set_quota(tenant.id, None, "live_streams", 2)
        await store.set_quota(tenant.id, None, "live_streams", 3)  # replaces
        await store.set_quota(tenant.id, "k_one", "audio_seconds_per_day", 60)
        await store.set_quota(other.id, None, "upload_bytes", 10)
        got = {(q.key_id, q.name, q.value) for q in await store.quotas(tenant.id)}
        assert got == {(None, "live_streams", 3), ("k_one", "audio_seconds_per_day", 60)}
        assert await store.clear_quotas(tenant.id, "k_one", ["live_streams"]) == 0
        assert await store.clear_quotas(tenant.id, "k_one") == 1
        assert await store.clear_quotas(tenant.id, None, ["live_streams"]) == 1
        assert await store.quotas(tenant.id) == []
        assert len(await store.quotas(other.id)) == 1
        assert {t.name for t in await store.list_tenants()} == {"acme", "other"}


@KINDS
async def test_use_counts_sessions_under_way_and_audio_of_the_day_and_month(
    kind: str, tmp_path: Path
) -> None:
    async with _store(kind, tmp_path) as store:
        tenant = await store.create_tenant("acme")
        key = generate_key()
        await store.add_api_key(tenant.id, key, "mic")
        today = datetime.now(UTC).date()
        await _session(store, "live1", tenant.id, "live", key.key_id)
        await _session(store, "live2", tenant.id, "live")
        await _session(store, "file1", tenant.id, "file", key.key_id)
        await _session(store, "done", tenant.id, "file")
        await store.record_messages(
            [
                _transcript("done", 2, 90_000, day=today),
                ProgressMessage(sid="done", seq=3, status=SessionStatus.COMPLETED, percent=100),
            ]
        )
        if today.day > 1:  # earlier this month: counts for the month, not the day
            await _session(store, "old", tenant.id, "file")
            await store.record_message(_transcript("old", 2, 30_000, day=today - timedelta(1)))
            month = 120.0
        else:
            month = 90.0
        use = await store.quota_use(tenant.id, None, today)
        assert use.live_streams == 2
        assert use.uploads_in_flight == (2 if today.day > 1 else 1)  # "old" never completed
        assert (use.audio_seconds_today, use.audio_seconds_month) == (90.0, month)
        assert await store.quota_use(tenant.id, key.key_id, today) == Use(1, 1, 0.0, 0.0)

        # a finished live stream re-transcribed is a file job, not a live stream
        await store.record_message(
            ProgressMessage(sid="live2", seq=2, status=SessionStatus.COMPLETED, percent=100)
        )
        assert await store.reopen_session("live2") is not None
        again = await store.quota_use(tenant.id, None, today)
        assert (again.live_streams, again.uploads_in_flight) == (1, use.uploads_in_flight + 1)


@KINDS
async def test_a_transcript_stored_twice_counts_once(kind: str, tmp_path: Path) -> None:
    async with _store(kind, tmp_path) as store:
        tenant = await store.create_tenant("acme")
        today = datetime.now(UTC).date()
        await _session(store, "s1", tenant.id, "file")
        await _session(store, "s2", tenant.id, "live")
        before = _counted(tenant.id, "file")
        first = _transcript("s1", 5, 12_500, day=today)
        assert await store.record_messages([first]) == 1
        assert await store.record_messages([first]) == 0  # the same record delivered again
        # the job run again after a crash: the same version's transcript under another seq,
        # in a batch with other messages (the careful path of the PostgreSQL store)
        rerun = _transcript("s1", 9, 12_400, day=today)
        live = _transcript("s2", 3, 4_000, model="base", day=today)
        assert await store.record_messages([rerun, live, first]) == 2
        # its re-transcription is a new version: counted again, as such
        second = _transcript("s1", 12, 12_000, version=2, model="base", day=today)
        await store.record_messages([second])

        rows = await store.usage(tenant.id, today, today)
        got = {(r.kind, r.model, r.audio_seconds, r.sessions) for r in rows}
        assert got == {
            ("file", "tiny.en", 12.5, 1),
            ("live", "base", 4.0, 1),
            ("retranscription", "base", 12.0, 1),
        }
        assert _counted(tenant.id, "file") - before == 12.5
        assert await store.usage(tenant.id, today + timedelta(1), today + timedelta(2)) == []
        assert {r.tenant_id for r in await store.usage(None, today, today)} == {tenant.id}

        # deleting the session keeps its usage (it holds no content)
        assert await store.mark_deleted("s1", "request")
        await store.purge_session("s1")
        assert len(await store.usage(tenant.id, today, today)) == 3
