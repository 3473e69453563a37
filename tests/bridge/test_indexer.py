"""The segment indexer, on the in-process bus with the real SQLite store and
search index: a commit the bus refuses (Kafka answers ILLEGAL_GENERATION while
the group rebalances, e.g. as a second bridge joins) does not stop indexing,
nor does a search cluster that is down for a while (the chaos soak saw an
OpenSearch restart end both bridges)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from voxwire.access.control import NoAccessSync
from voxwire.bridge.indexer import SegmentIndexer
from voxwire.bus import MemoryBus, Record
from voxwire.bus.memory import MemorySubscription
from voxwire.core.errors import BusError
from voxwire.search import SearchIndexError
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.sessions.opening import open_session
from voxwire.store import SqliteStore
from voxwire.wire.topics import RESULTS_TOPIC
from voxwire_client.api import SearchQuery
from voxwire_client.messages import SegmentData, SegmentMessage, encode_message


class RestartingIndex(SqliteSearchIndex):
    """The SQLite index, refusing its first ``down`` writes as OpenSearch does
    while it restarts (its client's "connection refused", translated)."""

    down = 2
    refused = 0

    async def index_segments(self, *args: Any, **kwargs: Any) -> None:
        if self.refused < self.down:
            self.refused += 1
            raise SearchIndexError(
                "OpenSearch: ConnectionError(... [Errno 111] Connection refused)",
                hint="check VOXWIRE_OPENSEARCH_URL",
            )
        await super().index_segments(*args, **kwargs)


class RebalancingBus(MemoryBus):
    """The in-process bus whose first commit on each subscription is refused."""

    def subscribe(self, topic: str, group: str) -> MemorySubscription:
        subscription = super().subscribe(topic, group)
        commit, refused = subscription.commit, []

        async def refuse_once(*records: Record) -> None:
            if not refused:
                refused.append(records)
                raise BusError(
                    f'commit on {topic} failed: KafkaError{{code=ILLEGAL_GENERATION,val=22,str="'
                    'Broker: Specified group generation id is not valid"}}; the record may be '
                    "delivered again"
                )
            await commit(*records)

        subscription.commit = refuse_once  # type: ignore[method-assign]
        return subscription


async def test_a_refused_commit_does_not_stop_indexing(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), RebalancingBus()
    index = SqliteSearchIndex(tmp_path / "search.sqlite3")
    assert await index.ensure_index()
    tenant = await store.create_tenant("t")
    sid = await open_session(store, NoAccessSync(), tenant, prompts=())
    indexer = SegmentIndexer(bus, store, index)
    running = asyncio.create_task(indexer.run())

    async def final(index_: int, text: str) -> None:
        segment = SegmentData(id=f"{sid}-{index_}", index=index_, start_ms=0, end_ms=900, text=text)
        message = SegmentMessage(sid=sid, seq=2 + index_, type="final", segment=segment)
        await bus.produce(RESULTS_TOPIC, sid, encode_message(message))

    async def found(words: str) -> bool:
        async with asyncio.timeout(10):
            while not (await index.search(tenant.id, SearchQuery(q=words))).hits:
                assert not running.done(), running
                await asyncio.sleep(0.05)
        return True

    try:
        await final(0, "the trucks leave on monday")  # its commit is refused
        assert await found("trucks")
        await final(1, "the warehouse opens at nine")
        assert await found("warehouse")
        assert not running.done()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_an_index_that_is_down_for_a_while_delays_indexing_and_stops_nothing(
    tmp_path: Path,
) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    index = RestartingIndex(tmp_path / "search.sqlite3")
    assert await index.ensure_index()
    tenant = await store.create_tenant("t")
    sid = await open_session(store, NoAccessSync(), tenant, prompts=())
    indexer = SegmentIndexer(bus, store, index, retry_s=(0.01, 0.05))
    running = asyncio.create_task(indexer.run())
    segment = SegmentData(id=f"{sid}-0", index=0, start_ms=0, end_ms=900, text="the ferry is late")
    await bus.produce(
        RESULTS_TOPIC,
        sid,
        encode_message(SegmentMessage(sid=sid, seq=2, type="final", segment=segment)),
    )
    try:
        async with asyncio.timeout(10):
            while not (await index.search(tenant.id, SearchQuery(q="ferry"))).hits:
                assert not running.done(), running
                await asyncio.sleep(0.05)
        assert index.refused == index.down
        assert not running.done()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
