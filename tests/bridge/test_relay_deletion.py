"""The relay and deleted sessions: what a worker emits for a session after its
deletion (its stream's last final, a job that was running) is neither stored nor
published, so no retained message of it comes back on a real Mosquitto."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from tests.broker.conftest import PahoClient
from voxwire.bridge.relay import ResultRelay
from voxwire.broker.mqtt import MqttConnection
from voxwire.bus import MemoryBus
from voxwire.store import SessionRecord, SqliteStore
from voxwire.wire.topics import RESULTS_TOPIC
from voxwire_client.messages import SegmentData, SegmentMessage, SessionStatus, encode_message


async def test_results_of_a_deleted_session_are_dropped(tmp_path: Path, mosquitto: int) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    tenant = await store.create_tenant("acme")
    for sid in ("s_kept", "s_gone"):
        await store.create_session(
            SessionRecord(sid, tenant.id, SessionStatus.TRANSCRIBING, datetime.now(UTC))
        )
    assert await store.mark_deleted("s_gone", "request")
    publisher = MqttConnection("127.0.0.1", mosquitto, client_id="relay-t", session_expiry_s=0)
    await asyncio.to_thread(publisher.connect)
    relay = ResultRelay(bus, store, publisher, expiry_s=60)
    running = asyncio.create_task(relay.run())
    try:
        for sid in ("s_gone", "s_kept"):
            segment = SegmentData(id=f"{sid}-0", index=0, start_ms=0, end_ms=900, text="last")
            final = SegmentMessage(sid=sid, seq=7, type="final", segment=segment)
            await bus.produce(RESULTS_TOPIC, sid, encode_message(final))
        async with asyncio.timeout(10):
            while relay.relayed < 1 or not await store.messages_after("s_kept", 0):
                await asyncio.sleep(0.02)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert await store.messages_after("s_gone", 0) == []
    assert relay.relayed == 1
    subscriber = PahoClient(mosquitto, "sub-t")
    assert not subscriber.connect().is_failure
    try:
        subscriber.subscribe("transcription/+/result")
        got = []
        while (message := await asyncio.to_thread(subscriber.next_message, 1.5)) is not None:
            got.append(message.topic)
        assert got == ["transcription/s_kept/result"]
    finally:
        subscriber.close()
        await asyncio.to_thread(publisher.close)
        await store.close()
