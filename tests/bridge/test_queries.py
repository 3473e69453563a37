"""The bridge's answers to requests over MQTT, with the real store and search
index: a stream request asked again (at-least-once delivery) opens one stream,
and is refused once that stream has ended; a revoked key is told so; a key of
another installation is left unanswered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from voxwire.access.control import NoAccessSync
from voxwire.access.keys import generate_key
from voxwire.bridge.queries import QueryService
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.sessions.streams import StreamService
from voxwire.store import SqliteStore
from voxwire.wire.records import ClientPublish, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, QUERIES_TOPIC
from voxwire_client.api import QueryResult
from voxwire_client.messages import ProgressMessage, SessionStatus
from voxwire_client.topics import query_request_topic


class Answers:
    """The broker side: what the service published."""

    def __init__(self) -> None:
        self.got: list[tuple[str, QueryResult, bytes | None]] = []

    async def publish_async(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
        timeout_s: float | None = None,
        correlation: bytes | None = None,
    ) -> None:
        self.got.append((topic, QueryResult.model_validate_json(payload), correlation))


async def test_requests_are_answered_once_per_stream_and_only_for_keys_issued_here(
    tmp_path: Path,
) -> None:
    store, bus, answers = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus(), Answers()
    settings = Settings(data_dir=tmp_path)
    tenant = await store.create_tenant("t")
    key, revoked, foreign = generate_key(), generate_key(), generate_key()
    await store.add_api_key(tenant.id, key, "device")
    await store.add_api_key(tenant.id, revoked, "old")
    await store.revoke_api_key(revoked.key_id)
    streams = StreamService(store, bus, NoAccessSync(), settings)
    index = SqliteSearchIndex(tmp_path / "search.sqlite3")
    service = QueryService(bus, store, index, answers, streams, settings)
    audio = bus.subscribe(AUDIO_TOPIC, "worker")
    running = asyncio.create_task(service.run())

    async def ask(key_id: str, qid: str, body: bytes) -> None:
        record = ClientPublish(topic=query_request_topic(key_id, qid), payload=body)
        await bus.produce(QUERIES_TOPIC, key_id, record.encode())

    async def answered(count: int) -> None:
        async with asyncio.timeout(10):
            while len(answers.got) < count or service.answered < count:
                await asyncio.sleep(0.01)

    try:
        opening = b'{"op": "open_stream", "stream": {"language": "en"}}'
        await ask(key.key_id, "open", opening)
        await ask(key.key_id, "open", opening)  # delivered again
        await ask(foreign.key_id, "open", opening)  # another installation's key
        await ask(revoked.key_id, "open", opening)
        await answered(3)
        first, again, refused = (result for _, result, _ in answers.got)
        assert first.stream is not None and again.stream is not None
        assert again.stream.sid == first.stream.sid
        assert refused.error is not None and refused.error.code == "unauthorized"
        assert "revoked" in refused.error.message
        start = decode_audio_record((await audio.next()).value)
        assert isinstance(start, StreamStart) and start.sid == first.stream.sid
        try:  # one stream: one start for the workers
            async with asyncio.timeout(0.5):
                second = await audio.next()
        except TimeoutError:
            second = None
        assert second is None, second

        ended = ProgressMessage(
            sid=first.stream.sid, seq=9, status=SessionStatus.COMPLETED, percent=100
        )
        await store.record_message(ended)
        await ask(key.key_id, "open", opening)
        await answered(4)
        late = answers.got[3][1]
        assert late.stream is None and late.error is not None
        assert late.error.code == "conflict" and late.error.hint and "new qid" in late.error.hint
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
