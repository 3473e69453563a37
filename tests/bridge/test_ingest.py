"""MqttIngest: client messages onto the bus, acknowledged only once the bus has them.

The acknowledgement tests run against Mosquitto (MQTT 5, persistent session) when it
is installed; the embedded broker (MQTT 3.1.1) checks routing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from tests.broker.conftest import PahoClient, RunningBroker
from voxwire.bridge.ingest import MqttIngest
from voxwire.bus.memory import MemoryBus
from voxwire.core.errors import BusError
from voxwire.store import SessionRecord, SqliteStore
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.messages import SessionStatus

pytestmark = pytest.mark.timeout(60)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FlakyBus(MemoryBus):
    """A memory bus that refuses records while ``down``, as Kafka does when it is away."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.refused = 0

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if self.down:
            self.refused += 1
            raise BusError(f"the bus is down; cannot produce to {topic}")
        await super().produce(topic, key, value)


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


@asynccontextmanager
async def _running(ingest: MqttIngest) -> AsyncIterator[MqttIngest]:
    task = asyncio.create_task(ingest.run())
    try:
        await _until(lambda: ingest.connected)
        await asyncio.sleep(0.3)  # its SUBSCRIBEs answered
        yield ingest
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _ingest(
    bus: MemoryBus,
    port: int,
    *,
    share_group: str | None = None,
    is_ours: Callable[[str], Awaitable[bool]] | None = None,
) -> MqttIngest:
    return MqttIngest(
        bus,
        "127.0.0.1",
        port,
        client_id="ingest-1",
        username="service",
        password="service-pw",
        share_group=share_group,
        session_expiry_s=60,
        is_ours=is_ours,
    )


async def test_a_message_the_bus_refused_is_held_and_comes_again(mosquitto: int) -> None:
    bus = FlakyBus()
    records = bus.subscribe(AUDIO_TOPIC, "test")
    device = PahoClient(mosquitto, "device-1", protocol=paho.MQTTv5)
    assert not (await asyncio.to_thread(device.connect)).is_failure
    try:
        async with _running(_ingest(bus, mosquitto)) as ingest:
            await asyncio.to_thread(device.publish, "audio/s1/chunk/0", b"zero")
            first = await asyncio.wait_for(records.next(), 5)
            assert (first.key, ClientPublish.model_validate_json(first.value).payload) == (
                "s1",
                b"zero",
            )
            bus.down = True
            await asyncio.to_thread(device.publish, "audio/s1/chunk/1", b"one")
            await _until(lambda: bus.refused > 0)
            assert ingest.forwarded == 1
        bus.down = False  # the ingest stopped without acknowledging chunk 1

        async with _running(_ingest(bus, mosquitto)) as again:
            second = await asyncio.wait_for(records.next(), 5)
            message = ClientPublish.model_validate_json(second.value)
            assert (second.key, message.topic, message.payload) == (
                "s1",
                "audio/s1/chunk/1",
                b"one",
            )
            await _until(lambda: again.forwarded == 1)
    finally:
        device.close()


async def test_a_message_waits_while_the_bus_is_down(mosquitto: int) -> None:
    bus = FlakyBus()
    records = bus.subscribe(AUDIO_TOPIC, "test")
    device = PahoClient(mosquitto, "device-1", protocol=paho.MQTTv5)
    assert not (await asyncio.to_thread(device.connect)).is_failure
    try:
        async with _running(_ingest(bus, mosquitto, share_group="vx-test")) as ingest:
            bus.down = True
            await asyncio.to_thread(device.publish, "audio/s2/control", b'{"type":"end"}')
            await _until(lambda: bus.refused > 0)
            bus.down = False
            record = await asyncio.wait_for(records.next(), 5)
            assert record.key == "s2"
            assert ingest.forwarded == 1
    finally:
        device.close()


async def test_routes_client_topics_on_the_embedded_broker(running_broker: RunningBroker) -> None:
    bus = MemoryBus()
    records = bus.subscribe(AUDIO_TOPIC, "test")
    device = PahoClient(running_broker.port, "device-1", "service", "service-pw")
    assert not (await asyncio.to_thread(device.connect)).is_failure
    try:
        async with _running(_ingest(bus, running_broker.port)) as ingest:
            await asyncio.to_thread(device.publish, "audio/s3/chunk/0", b"pcm")
            record = await asyncio.wait_for(records.next(), 5)
            assert record.key == "s3"
            await asyncio.to_thread(device.publish, "audio/s3/chunk/not-a-number", b"x")
            await _until(lambda: ingest.dropped == 1)
            assert ingest.forwarded == 1
    finally:
        device.close()


async def test_on_a_shared_broker_only_this_installations_audio_goes_on(
    mosquitto: int, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "db.sqlite3")
    tenant = await store.create_tenant("acme")
    await store.create_session(
        SessionRecord(sid="ours", tenant_id=tenant.id, status=SessionStatus.QUEUED, created_at=NOW)
    )

    async def is_ours(sid: str) -> bool:
        return await store.session_owner(sid) is not None

    bus = MemoryBus()
    records = bus.subscribe(AUDIO_TOPIC, "test")
    device = PahoClient(mosquitto, "device-1", protocol=paho.MQTTv5)
    assert not (await asyncio.to_thread(device.connect)).is_failure
    topics = [f"audio/{sid}/chunk/{n}" for n in range(20) for sid in ("theirs", "ours")]
    topics += ["audio/theirs/control", "audio/ours/control"]
    try:
        async with _running(_ingest(bus, mosquitto, is_ours=is_ours)) as ingest:
            for topic in topics:
                await asyncio.to_thread(device.publish, topic, topic.encode())
            got = [await asyncio.wait_for(records.next(), 5) for _ in range(21)]
            assert [ClientPublish.model_validate_json(r.value).topic for r in got] == [
                t for t in topics if t.startswith("audio/ours/")
            ]
            await _until(lambda: ingest.foreign == 21)
            assert ingest.forwarded == 21
        # the others' audio was acknowledged: it does not come again
        async with _running(_ingest(bus, mosquitto, is_ours=is_ours)) as again:
            await asyncio.to_thread(device.publish, "audio/ours/chunk/20", b"last")
            record = await asyncio.wait_for(records.next(), 5)
            assert ClientPublish.model_validate_json(record.value).payload == b"last"
            assert again.foreign == 0
    finally:
        device.close()
        await store.close()
