"""The bridge's answers to requests over MQTT, with the real store, search
index and blob store: a stream request asked again (at-least-once delivery)
opens one stream, and is refused once that stream has ended; a revoked key is
told so; a key of another installation is left unanswered. A file uploaded in
parts is resumable and becomes one session, whatever order and however often
its parts and its finish arrive."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from evaluation.corpus import eval_with_text
from voxwire.access.control import NoAccessSync
from voxwire.access.keys import generate_key
from voxwire.blobs import LocalBlobStore
from voxwire.bridge.queries import QueryService
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.sessions.deletion import SessionEraser
from voxwire.sessions.parts import PartUploads, upload_sid
from voxwire.sessions.streams import StreamService
from voxwire.sessions.uploads import UploadService
from voxwire.store import SqliteStore, Tenant
from voxwire.wire.records import ClientPublish, FileJob, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, JOBS_TOPIC, QUERIES_TOPIC
from voxwire_client.api import MAX_UPLOAD_PART_BYTES, QueryResult
from voxwire_client.messages import ProgressMessage, SessionStatus
from voxwire_client.topics import query_request_topic, query_result_topic, upload_part_topic


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


class Bridge:
    """The query service on the in-process bus, with a tenant and its key."""

    def __init__(self, tmp_path: Path, **configured: Any) -> None:
        self.store, self.bus, self.answers = (
            SqliteStore(tmp_path / "store.sqlite3"),
            MemoryBus(),
            Answers(),
        )
        settings = Settings(data_dir=tmp_path, **configured)
        self.blobs = LocalBlobStore(tmp_path / "blobs")
        streams = StreamService(self.store, self.bus, NoAccessSync(), settings)
        uploads = UploadService(settings, self.store, self.bus, self.blobs)
        parts = PartUploads(self.blobs, uploads, self.store)
        index = SqliteSearchIndex(tmp_path / "search.sqlite3")
        eraser = SessionEraser(self.store, self.blobs, index, self.bus)
        self.service = QueryService(
            self.bus, self.store, index, self.answers, streams, parts, settings, eraser
        )
        self.key = generate_key()
        self.tenant: Tenant | None = None

    async def ask(self, key_id: str, qid: str, body: bytes) -> None:
        record = ClientPublish(topic=query_request_topic(key_id, qid), payload=body)
        await self.bus.produce(QUERIES_TOPIC, key_id, record.encode())

    async def part(self, upload: str, n: int, data: bytes) -> None:
        record = ClientPublish(topic=upload_part_topic(self.key.key_id, upload, n), payload=data)
        await self.bus.produce(QUERIES_TOPIC, self.key.key_id, record.encode())

    async def answered(self, count: int) -> QueryResult:
        """Until ``count`` answers were published; the last one."""
        async with asyncio.timeout(10):
            while len(self.answers.got) < count or self.service.answered < count:
                await asyncio.sleep(0.01)
        return self.answers.got[count - 1][1]


@pytest.fixture
async def bridge(tmp_path: Path) -> AsyncIterator[Bridge]:
    bridge = Bridge(tmp_path)
    bridge.tenant = await bridge.store.create_tenant("t")
    await bridge.store.add_api_key(bridge.tenant.id, bridge.key, "device")
    running = asyncio.create_task(bridge.service.run())
    try:
        yield bridge
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_requests_are_answered_once_per_stream_and_only_for_keys_issued_here(
    bridge: Bridge,
) -> None:
    store, bus, answers, key = bridge.store, bridge.bus, bridge.answers, bridge.key
    ask, answered = bridge.ask, bridge.answered
    assert bridge.tenant is not None
    revoked, foreign = generate_key(), generate_key()
    await store.add_api_key(bridge.tenant.id, revoked, "old")
    await store.revoke_api_key(revoked.key_id)
    audio = bus.subscribe(AUDIO_TOPIC, "worker")
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


async def test_a_file_uploaded_in_parts_resumes_and_becomes_one_session(bridge: Bridge) -> None:
    item = eval_with_text()[0]
    data = item.path.read_bytes()
    size = len(data) // 5 + 1
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    assert len(pieces) == 5
    jobs = bridge.bus.subscribe(JOBS_TOPIC, "worker")
    answers = bridge.answers.got

    # a device sent parts 3, 0, 3 again and 1, then lost its connection
    for n in (3, 0, 3, 1):
        await bridge.part("rec1", n, pieces[n])
    await bridge.ask(bridge.key.key_id, "q1", b'{"op": "upload_status", "upload": "rec1"}')
    held = (await bridge.answered(1)).upload
    assert held is not None and held.parts == (0, 1, 3)
    assert held.bytes == sum(len(pieces[n]) for n in (0, 1, 3))

    finish = {"op": "finish_upload", "upload": "rec1", "parts": 5, "filename": item.path.name}
    await bridge.ask(bridge.key.key_id, "q2", json.dumps(finish).encode())
    early = (await bridge.answered(2)).error
    assert early is not None and early.code == "invalid_request"
    assert "parts 2, 4 of 5 have not arrived" in early.message

    # it reconnects and sends what is missing; a wrong checksum is refused
    for n in (2, 4):
        await bridge.part("rec1", n, pieces[n])
    wrong = finish | {"sha256": hashlib.sha256(b"other").hexdigest()}
    await bridge.ask(bridge.key.key_id, "q3", json.dumps(wrong).encode())
    mismatch = (await bridge.answered(3)).error
    assert mismatch is not None and "SHA-256" in mismatch.message

    right = finish | {
        "sha256": hashlib.sha256(data).hexdigest(),
        "prompts": [{"id": "p", "text": "x"}],
    }
    await bridge.ask(bridge.key.key_id, "q4", json.dumps(right).encode())
    await bridge.ask(bridge.key.key_id, "q4", json.dumps(right).encode())  # delivered again
    first, again = (await bridge.answered(4)).session, (await bridge.answered(5)).session
    assert first is not None and again is not None and again.sid == first.sid
    assert first.sid == upload_sid(bridge.key.key_id, "rec1")
    assert first.filename == item.path.name and [p.id for p in first.prompts] == ["p"]
    assert first.endpoints.topic_filter == f"transcription/{first.sid}/+"
    job = FileJob.model_validate_json((await jobs.next()).value)
    assert job.sid == first.sid and job.duration_ms == round(item.duration_s * 1000)
    try:  # one session: one job
        async with asyncio.timeout(0.5):
            second = await jobs.next()
    except TimeoutError:
        second = None
    assert second is None, second

    # the parts are gone once the session exists, and a late repeat is not kept
    await bridge.part("rec1", 2, pieces[2])
    await bridge.ask(bridge.key.key_id, "q5", b'{"op": "upload_status", "upload": "rec1"}')
    after = (await bridge.answered(6)).upload
    assert after is not None and after.parts == () and after.bytes == 0
    original = f"original{item.path.suffix}"
    assert list(bridge.blobs.names(first.sid, "")) == ["audio.pcm", original]
    assert bridge.blobs.get(bridge.blobs.key(first.sid, original)) == data  # the file, whole
    assert [topic for topic, _, _ in answers] == [
        query_result_topic(bridge.key.key_id, q) for q in ("q1", "q2", "q3", "q4", "q4", "q5")
    ]


@pytest.mark.parametrize(
    ("payload", "code", "words"),
    [
        (b"x" * (MAX_UPLOAD_PART_BYTES + 1), "payload_too_large", "cut the file"),
        (b"", "invalid_request", "is empty"),
    ],
)
async def test_a_part_that_cannot_be_kept_is_answered_on_its_upload_topic(
    bridge: Bridge, payload: bytes, code: str, words: str
) -> None:
    await bridge.part("rec2", 0, payload)
    result = await bridge.answered(1)
    assert bridge.answers.got[0][0] == query_result_topic(bridge.key.key_id, "rec2")
    assert result.error is not None and result.error.code == code
    assert words in result.error.message + (result.error.hint or "")


async def test_a_file_that_is_not_audio_fails_its_session_with_the_decoder_error(
    bridge: Bridge,
) -> None:
    await bridge.part("rec3", 0, b"not audio at all" * 100)
    finish = b'{"op": "finish_upload", "upload": "rec3", "parts": 1, "filename": "a.wav"}'
    await bridge.ask(bridge.key.key_id, "q6", finish)
    result = await bridge.answered(1)
    assert result.error is not None and result.error.code.startswith("audio")
    sid = upload_sid(bridge.key.key_id, "rec3")
    assert result.error.sid == sid
    session = await bridge.store.get_session(sid)
    assert session is not None and session.status == SessionStatus.FAILED
    assert bridge.blobs.names(sid, "part_") == {}


async def test_a_device_key_opens_sessions_and_reads_only_its_own_transcripts(
    bridge: Bridge,
) -> None:
    store, app = bridge.store, bridge.key  # the fixture's key is a tenant key
    assert bridge.tenant is not None
    one, two = generate_key(), generate_key()
    await store.add_api_key(bridge.tenant.id, one, "mic-one", "device")
    await store.add_api_key(bridge.tenant.id, two, "mic-two", "device")
    asked = 0

    async def ask(key_id: str, qid: str, body: bytes) -> QueryResult:
        nonlocal asked
        await bridge.ask(key_id, qid, body)
        asked += 1
        return await bridge.answered(asked)

    opened = await ask(one.key_id, "open", b'{"op": "open_stream", "stream": {}}')
    assert opened.stream is not None, opened
    sid = opened.stream.sid
    session = await store.get_session(sid)
    assert session is not None and session.key_id == one.key_id
    read = json.dumps({"op": "transcript", "sid": sid}).encode()
    assert (await ask(one.key_id, "read", read)).transcript is not None
    assert (await ask(app.key_id, "read-app", read)).transcript is not None
    peek = await ask(two.key_id, "peek", read)
    assert peek.transcript is None and peek.error is not None
    assert peek.error.code == "not_found"
    search = await ask(two.key_id, "search", b'{"q": "hello"}')
    assert search.page is None and search.error is not None
    assert search.error.code == "forbidden" and "device key" in search.error.message

    # a file a device uploads in parts is its session too
    data = b"RIFF-not-really-audio"  # a session all the same (failed, audio_unsupported)
    record = ClientPublish(topic=upload_part_topic(one.key_id, "rec", 0), payload=data)
    await bridge.bus.produce(QUERIES_TOPIC, one.key_id, record.encode())
    finish = {"op": "finish_upload", "upload": "rec", "parts": 1, "filename": "a.wav"}
    await ask(one.key_id, "rec-done", json.dumps(finish).encode())
    uploaded = await store.get_session(upload_sid(one.key_id, "rec"))
    assert uploaded is not None and uploaded.key_id == one.key_id


async def test_a_device_deletes_its_session_over_mqtt(bridge: Bridge) -> None:
    store = bridge.store
    assert bridge.tenant is not None
    one, two = generate_key(), generate_key()
    await store.add_api_key(bridge.tenant.id, one, "mic-one", "device")
    await store.add_api_key(bridge.tenant.id, two, "mic-two", "device")
    asked = 0

    async def ask(key_id: str, qid: str, body: dict[str, str]) -> QueryResult:
        nonlocal asked
        await bridge.ask(key_id, qid, json.dumps(body).encode())
        asked += 1
        return await bridge.answered(asked)

    audio = bridge.bus.subscribe(AUDIO_TOPIC, "worker")
    opened = await ask(one.key_id, "open", {"op": "open_stream"})
    assert opened.stream is not None, opened
    sid = opened.stream.sid
    await audio.next()  # the stream's start
    delete = {"op": "delete_session", "sid": sid}
    refused = await ask(two.key_id, "del-two", delete)
    assert refused.deleted is None and refused.error is not None
    assert refused.error.code == "not_found"
    assert await store.get_session(sid) is not None
    deleted = await ask(one.key_id, "del", delete)
    assert deleted.error is None and deleted.deleted is not None and deleted.deleted.sid == sid
    end = decode_audio_record((await asyncio.wait_for(audio.next(), 5)).value)
    assert end.kind == "publish" and end.topic == f"audio/{sid}/control"  # the stream ended
    assert await store.get_session(sid) is None
    read = await ask(one.key_id, "read", {"op": "transcript", "sid": sid})
    assert read.error is not None and read.error.code == "not_found"
    again = await ask(one.key_id, "del-again", delete)  # at least once delivery
    assert again.deleted is not None and again.error is None
