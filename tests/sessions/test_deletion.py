"""Deleting a session, in both modes, against the real stores of each.

Embedded: SQLite store, SQLite FTS5 index, local blobs, the embedded broker.
Distributed: PostgreSQL, OpenSearch, S3 (moto's server), Redis, Mosquitto.
After a deletion none of them holds anything of the session; a crash half-way
is finished by the next attempt or by the sweeper; retention deletes old
sessions and keeps new ones.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.broker.conftest import (
    USERS,
    BrokerThread,
    DictAuthenticator,
    PahoClient,
    PrefixAuthorizer,
    mosquitto,  # noqa: F401  (a fixture)
)
from tests.s3 import make_bucket, s3_server
from tests.store import fresh_schema, opensearch_url, pg_query, postgres_store, redis_url, require
from voxwire.blobs import BlobStore, LocalBlobStore, S3BlobStore
from voxwire.broker.embedded import EmbeddedBroker
from voxwire.broker.mqtt import MqttConnection
from voxwire.bus.memory import MemoryBus
from voxwire.core.metrics import SESSIONS_DELETED
from voxwire.gateway.sweeper import Sweeper
from voxwire.search import SearchIndex, SearchQuery
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.sessions.deletion import Actor, Reason, SessionEraser
from voxwire.store import SessionRecord, SqliteStore, Store
from voxwire.wire.records import decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.messages import (
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)
from voxwire_client.topics import TopicKind, session_topic

pytestmark = pytest.mark.timeout(120)


def secret_of(sid: str) -> str:
    """A word said only in session ``sid``: nothing may find it after its deletion."""
    return "kiwi" + "".join(chr(ord("a") + int(c, 16)) for c in sid[2:])


@dataclass
class Platform:
    """The adapters of one mode, with ways to read back what they hold, raw."""

    mode: str
    store: Store
    search: SearchIndex
    blobs: BlobStore
    bus: MemoryBus
    broker_port: int
    broker_login: tuple[str, str] | None
    raw_store: Callable[[], Awaitable[str]]
    checkpoints: Any = None
    redis: Any = None
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    def eraser(self, blobs: BlobStore | None = None, settle_s: float = 60.0) -> SessionEraser:
        publisher = MqttConnection(
            "127.0.0.1",
            self.broker_port,
            client_id=f"eraser-{secrets.token_hex(3)}",
            username=self.broker_login[0] if self.broker_login else None,
            password=self.broker_login[1] if self.broker_login else None,
            session_expiry_s=0,
        )
        publisher.connect()
        self.stack.callback(publisher.close)
        return SessionEraser(
            self.store,
            blobs or self.blobs,
            self.search,
            self.bus,
            retained=publisher,
            checkpoints=self.checkpoints,
            settle_s=settle_s,
        )

    def subscriber(self) -> PahoClient:
        login = self.broker_login or (None, None)
        client = PahoClient(self.broker_port, f"sub-{secrets.token_hex(3)}", *login)
        assert not client.connect().is_failure
        self.stack.callback(client.close)
        return client

    def retained(self, sid: str) -> list[bytes]:
        """The retained messages a new subscriber of the session's topics gets."""
        client = self.subscriber()
        client.subscribe(f"transcription/{sid}/#")
        got = []
        while (message := client.next_message(timeout=1.0)) is not None:
            got.append(message.payload)
        return got


@pytest.fixture
def embedded_broker_port() -> Iterator[int]:
    thread = BrokerThread()
    broker = EmbeddedBroker(DictAuthenticator(USERS), PrefixAuthorizer(), tcp_port=0, ws_port=None)
    thread.call(broker.start())
    try:
        yield broker.tcp_port
    finally:
        thread.call(broker.stop())
        thread.close()


@pytest.fixture(params=["embedded", "distributed"])
async def platform(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Platform]:
    if request.param == "embedded":
        port = request.getfixturevalue("embedded_broker_port")
        store = SqliteStore(tmp_path / "store.sqlite3")

        async def sqlite_raw() -> str:
            files = [*tmp_path.glob("store.sqlite3*"), *tmp_path.glob("search.sqlite3*")]
            return "".join(f"<<{p.name}>>" + p.read_bytes().decode("latin-1") for p in files)

        found = Platform(
            "embedded",
            store,
            SqliteSearchIndex(tmp_path / "search.sqlite3"),
            LocalBlobStore(tmp_path / "blobs"),
            MemoryBus(),
            port,
            ("service", "service-pw"),
            sqlite_raw,
        )
        await found.search.ensure_index()
        yield found
        await found.stack.aclose()
        await store.close()
        await found.search.close()
        return
    for service in ("postgres", "redis", "opensearch"):
        require(service)
    port = request.getfixturevalue("mosquitto")
    async with _distributed(port) as found:
        yield found


@asynccontextmanager
async def _distributed(port: int) -> AsyncIterator[Platform]:
    import redis.asyncio as aioredis

    from voxwire.search.opensearch import OpenSearchIndex
    from voxwire.workers.stream.checkpoints import RedisCheckpoints

    schema = fresh_schema()
    async with AsyncExitStack() as outer:
        store = await outer.enter_async_context(postgres_store(schema))
        url = outer.enter_context(s3_server())
        make_bucket(url, "vx-delete")
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        search = OpenSearchIndex.open(
            opensearch_url(), alias=f"vxtest-{secrets.token_hex(4)}-transcripts", replicas=0
        )
        await search.ensure_index()
        outer.push_async_callback(search.drop_index)
        prefix = f"vxtest{secrets.token_hex(3)}"
        redis = aioredis.from_url(redis_url())
        outer.push_async_callback(redis.aclose)

        async def pg_raw() -> str:
            rows: list[tuple[Any, ...]] = []
            for table in ("sessions", "messages", "segments", "matches", "transcripts"):
                rows += await pg_query(schema, f"SELECT t::text FROM {table} t")
            return "\n".join(str(r[0]) for r in rows)

        found = Platform(
            "distributed",
            store,
            search,
            S3BlobStore(client, "vx-delete", "ns"),
            MemoryBus(),
            port,
            None,
            pg_raw,
            checkpoints=RedisCheckpoints(aioredis.from_url(redis_url()), prefix=prefix),
            redis=redis,
        )
        outer.push_async_callback(found.stack.aclose)
        yield found


# -- seeding a session everywhere ---------------------------------------------------------


def _seg(sid: str, index: int, text: str) -> SegmentData:
    return SegmentData(
        id=f"{sid}-{index}", index=index, start_ms=index * 1000, end_ms=index * 1000 + 900,
        text=text,
    )  # fmt: skip


async def seed(
    platform: Platform,
    tenant_id: str,
    *,
    live: bool = False,
    created_at: datetime | None = None,
    key_id: str | None = None,
) -> SessionRecord:
    """A session with something of it in every store: rows, two transcript versions,
    a match, blobs, search documents, a checkpoint and retained messages."""
    sid = "s_" + secrets.token_hex(6)
    session = SessionRecord(
        sid=sid,
        tenant_id=tenant_id,
        status=SessionStatus.TRANSCRIBING if live else SessionStatus.QUEUED,
        created_at=created_at or datetime.now(UTC),
        filename=None if live else "call.wav",
        key_id=key_id,
    )
    await platform.store.create_session(session)
    secret = secret_of(sid)
    segment = _seg(sid, 0, f"the secret word is {secret}")
    messages: list[Message] = [
        SegmentMessage(sid=sid, seq=2, type="final", segment=segment),
        MatchMessage(sid=sid, seq=3, prompt_id="p", prompt=secret, score=1.0, start_ms=0,
                     end_ms=900, text=secret, highlight=f"<em>{secret}</em>", segment_ids=("0",)),
        TranscriptMessage(sid=sid, seq=4, text=segment.text, duration_ms=900, segments=(segment,)),
        TranscriptMessage(sid=sid, seq=5, text=segment.text, duration_ms=900, version=2,
                          segments=(segment,)),
    ]  # fmt: skip
    if not live:
        messages.append(
            ProgressMessage(sid=sid, seq=6, status=SessionStatus.COMPLETED, percent=100)
        )
    await platform.store.record_messages(messages)
    for name in ("original.wav", "audio.pcm", "live.000001.pcm"):
        await asyncio.to_thread(platform.blobs.put, platform.blobs.key(sid, name), b"RIFF" * 64)
    await platform.search.index_segments(tenant_id, sid, [segment], session.created_at, "en")
    await platform.search.refresh()
    if platform.redis is not None:
        await platform.redis.set(platform.checkpoints.key(sid), b"checkpoint")
    publisher = platform.subscriber()
    for kind in TopicKind:
        publisher.publish(session_topic(sid, kind), b'{"text": "' + secret.encode() + b'"}',
                          retain=True)  # fmt: skip
    assert len(platform.retained(sid)) == 3
    return session


async def nothing_left(platform: Platform, session: SessionRecord) -> None:
    """No store, index, blob store, Redis or broker holds anything of ``session``."""
    store, sid = platform.store, session.sid
    assert await store.get_session(sid) is None
    assert await store.session_owner(sid) is None
    assert sid not in [s.sid for s in await store.list_sessions(session.tenant_id)]
    assert await store.messages_after(sid, 0) == []
    assert await store.segments(sid) == []
    assert await store.matches(sid) == []
    assert await store.transcript_versions(sid) == []
    state = await store.session_state(sid)
    assert state is not None and state.deleted_at is not None and state.purged_at is not None
    secret = secret_of(sid)
    raw = await platform.raw_store()
    holding = [part[:24] for part in raw.split("<<") if secret in part or sid + "/" in part]
    assert holding == []
    page = await platform.search.search(session.tenant_id, SearchQuery(q=secret))
    assert page.hits == ()
    assert await asyncio.to_thread(platform.blobs.names, sid, "") == {}
    if isinstance(platform.blobs, LocalBlobStore):
        assert not (platform.blobs.root / sid).exists()
    if platform.redis is not None:
        assert await platform.redis.exists(platform.checkpoints.key(sid)) == 0
    assert platform.retained(sid) == []


# -- tests --------------------------------------------------------------------------------


async def test_a_deleted_session_leaves_nothing_anywhere(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = await platform.store.create_tenant("acme")
    kept = await seed(platform, tenant.id)
    session = await seed(platform, tenant.id)
    eraser = await asyncio.to_thread(platform.eraser)
    before = SESSIONS_DELETED.labels(reason="request")._value.get()
    state = await platform.store.session_state(session.sid)
    assert state is not None
    with caplog.at_level(logging.INFO, logger="voxwire.audit"):
        outcome = await eraser.delete(state, Actor(tenant.id, "k123"), Reason.REQUEST)
    assert outcome.tombstoned and outcome.finished
    await nothing_left(platform, session)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "voxwire.audit"]
    assert f"sid={session.sid}" in line and f"tenant={tenant.id}" in line
    assert "key=k123" in line and "reason=request" in line and secret_of(session.sid) not in line
    assert SESSIONS_DELETED.labels(reason="request")._value.get() == before + 1
    # the other session keeps everything
    assert await platform.store.get_session(kept.sid) is not None
    assert len(await platform.store.messages_after(kept.sid, 0)) == 5
    assert len(platform.retained(kept.sid)) == 3
    hits = (await platform.search.search(tenant.id, SearchQuery(q=secret_of(kept.sid)))).hits
    assert [h.sid for h in hits] == [kept.sid]
    # deleting again changes nothing and counts nothing
    state = await platform.store.session_state(session.sid)
    assert state is not None
    again = await eraser.delete(state, Actor(tenant.id, "k123"), Reason.REQUEST)
    assert not again.tombstoned and again.finished
    assert SESSIONS_DELETED.labels(reason="request")._value.get() == before + 1


class FailsOnce:
    """A blob store that fails the first deletion: a crash between the steps."""

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._blobs, name)

    def delete_session(self, sid: str) -> int:
        if not self.failed:
            self.failed = True
            from voxwire.blobs import BlobError

            raise BlobError("the blob store went away")
        return self._blobs.delete_session(sid)


@pytest.mark.parametrize("finisher", ["next_request", "sweeper"])
async def test_a_deletion_that_failed_half_way_is_finished(
    platform: Platform, finisher: str
) -> None:
    from voxwire.blobs import BlobError

    tenant = await platform.store.create_tenant("acme")
    session = await seed(platform, tenant.id)
    flaky = FailsOnce(platform.blobs)
    eraser = await asyncio.to_thread(platform.eraser, flaky, 0.0)  # type: ignore[arg-type]
    state = await platform.store.session_state(session.sid)
    assert state is not None
    with pytest.raises(BlobError):
        await eraser.delete(state, Actor(tenant.id, "k1"), Reason.REQUEST)
    # tombstoned: it reads as gone at once, though its data is still there
    assert await platform.store.get_session(session.sid) is None
    state = await platform.store.session_state(session.sid)
    assert state is not None and state.deleted_at is not None and state.purged_at is None
    assert await asyncio.to_thread(platform.blobs.names, session.sid, "")
    if finisher == "next_request":
        outcome = await eraser.delete(state, Actor(tenant.id, "k1"), Reason.REQUEST)
        assert outcome.finished
    else:
        report = await Sweeper(platform.store, eraser).sweep(datetime.now(UTC) + timedelta(1))
        assert (report.finished, report.failed) == (1, 0)
    await nothing_left(platform, session)


async def test_a_live_session_is_ended_then_deleted_and_finished_by_the_sweeper(
    platform: Platform,
) -> None:
    tenant = await platform.store.create_tenant("acme")
    session = await seed(platform, tenant.id, live=True)
    eraser = await asyncio.to_thread(platform.eraser)
    audio = platform.bus.subscribe(AUDIO_TOPIC, "test")
    state = await platform.store.session_state(session.sid)
    assert state is not None
    outcome = await eraser.delete(state, Actor(tenant.id), Reason.REQUEST)
    assert outcome.tombstoned and not outcome.finished  # its worker may still write
    record = decode_audio_record((await asyncio.wait_for(audio.next(), 5)).value)
    assert record.kind == "publish" and record.topic == f"audio/{session.sid}/control"
    assert b'"end"' in record.payload
    assert await platform.store.get_session(session.sid) is None
    # a worker's last results after the deletion: the relay drops them
    assert await platform.store.deleted_among({session.sid, "s_other"}) == {session.sid}
    sweeper = Sweeper(platform.store, eraser)
    assert (await sweeper.sweep()).finished == 0  # not settled yet
    report = await sweeper.sweep(datetime.now(UTC) + timedelta(seconds=61))
    assert report.finished == 1
    await nothing_left(platform, session)


async def test_retention_deletes_old_sessions_and_keeps_new_ones(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = await platform.store.create_tenant("acme")
    old = await seed(platform, tenant.id, created_at=datetime.now(UTC) - timedelta(days=31))
    new = await seed(platform, tenant.id, created_at=datetime.now(UTC) - timedelta(days=29))
    eraser = await asyncio.to_thread(platform.eraser)
    before = SESSIONS_DELETED.labels(reason="retention")._value.get()
    forever = await Sweeper(platform.store, eraser, retention_days=None).sweep()
    assert forever.expired == 0 and await platform.store.get_session(old.sid) is not None
    sweepers = [Sweeper(platform.store, eraser, retention_days=30) for _ in range(3)]
    with caplog.at_level(logging.INFO, logger="voxwire.audit"):
        reports = await asyncio.gather(*(s.sweep() for s in sweepers))  # several gateways
    assert sum(r.failed for r in reports) == 0
    await nothing_left(platform, old)
    assert SESSIONS_DELETED.labels(reason="retention")._value.get() == before + 1
    audits = [r.getMessage() for r in caplog.records if r.name == "voxwire.audit"]
    assert len(audits) == 1 and "reason=retention" in audits[0] and old.sid in audits[0]
    assert await platform.store.get_session(new.sid) is not None
    assert len(platform.retained(new.sid)) == 3
