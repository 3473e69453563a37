"""BrokerConnection: manual acks and sessions, messages handed to the loop,
subscriptions across reconnects, waiting for a broker that is not up yet.

Session tests run against Mosquitto (MQTT 5) when it is installed; the rest against
the embedded broker (MQTT 3.1.1).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import MQTTErrorCode

from voxwire.broker.connection import BrokerConnection, ConnectOptions, Received, ReconnectPolicy
from voxwire.core.errors import MqttError

from .conftest import PahoClient, RunningBroker

pytestmark = pytest.mark.timeout(40)

FAST = ReconnectPolicy(0.1, 0.5)


def _service(port: int, client_id: str = "svc-1") -> ConnectOptions:
    return ConnectOptions(
        "127.0.0.1", port, client_id, username="service", password="service-pw", reconnect=FAST
    )


def _drain(messages: queue.Queue[Received], timeout: float = 0.5) -> list[Received]:
    drained = []
    try:
        while True:
            drained.append(messages.get(timeout=timeout))
    except queue.Empty:
        return drained


@pytest.mark.parametrize(("session_expiry_s", "redelivered"), [(60, True), (None, False)])
def test_a_message_not_acknowledged_comes_again_in_a_persistent_session(
    mosquitto: int, session_expiry_s: int | None, redelivered: bool
) -> None:
    options = ConnectOptions(
        "127.0.0.1", mosquitto, "ingest-1", session_expiry_s=session_expiry_s, manual_ack=True
    )
    first_messages: queue.Queue[Received] = queue.Queue()
    first = BrokerConnection(options)
    first.subscribe(["audio/+/chunk/+"], first_messages.put)
    first.connect()
    assert first.protocol == paho.MQTTv5
    device = PahoClient(mosquitto, "device-1", protocol=paho.MQTTv5)
    try:
        assert not device.connect().is_failure
        device.publish("audio/s1/chunk/0", b"zero")
        device.publish("audio/s1/chunk/1", b"one")
        got = [first_messages.get(timeout=5), first_messages.get(timeout=5)]
        assert [(m.topic, m.payload, m.qos) for m in got] == [
            ("audio/s1/chunk/0", b"zero", 1),
            ("audio/s1/chunk/1", b"one", 1),
        ]
        first.ack(got[0])
        first.close()

        again: queue.Queue[Received] = queue.Queue()
        second = BrokerConnection(options)
        second.subscribe(["audio/+/chunk/+"], again.put)
        second.connect()
        try:
            payloads = [m.payload for m in _drain(again, timeout=1.0)]
            assert payloads == ([b"one"] if redelivered else [])
        finally:
            second.close()
    finally:
        device.close()


async def test_messages_reach_the_handler_on_the_loop_and_after_a_broker_restart(
    running_broker: RunningBroker,
) -> None:
    loop_thread = threading.get_ident()
    arrived: asyncio.Queue[tuple[bytes, bool]] = asyncio.Queue()

    def handler(message: Received) -> None:
        arrived.put_nowait((message.payload, threading.get_ident() == loop_thread))

    connection = BrokerConnection(_service(running_broker.port))
    connection.subscribe(["transcription/a1/+"], handler, loop=asyncio.get_running_loop())
    await asyncio.to_thread(connection.connect)
    alice = PahoClient(running_broker.port, "alice-1", "alice", "alice-pw")
    try:
        assert not (await asyncio.to_thread(alice.connect)).is_failure
        await asyncio.to_thread(alice.publish, "transcription/a1/result", b"before")
        assert await asyncio.wait_for(arrived.get(), 5) == (b"before", True)
        alice.close()
        await asyncio.sleep(0.5)  # amqtt's shutdown hangs on a disconnect still in progress

        await asyncio.to_thread(running_broker.stop)  # the embedded broker forgets sessions
        await asyncio.to_thread(running_broker.start)
        for _ in range(100):
            if connection.connected:
                break
            await asyncio.sleep(0.1)
        assert connection.connected
        alice = PahoClient(running_broker.port, "alice-2", "alice", "alice-pw")
        assert not (await asyncio.to_thread(alice.connect)).is_failure
        await asyncio.sleep(0.3)  # the SUBSCRIBE sent again on the CONNACK
        await asyncio.to_thread(alice.publish, "transcription/a1/result", b"after")
        assert await asyncio.wait_for(arrived.get(), 5) == (b"after", True)
    finally:
        alice.close()
        connection.close()


async def test_connect_retrying_waits_for_the_broker(running_broker: RunningBroker) -> None:
    running_broker.stop()
    connection = BrokerConnection(_service(running_broker.port))
    with pytest.raises(MqttError, match="cannot reach"):
        await asyncio.to_thread(connection.connect)
    waiting = asyncio.create_task(connection.connect_retrying())
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await asyncio.to_thread(running_broker.start)
    await asyncio.wait_for(waiting, 10)
    try:
        assert connection.connected
        assert connection.protocol == paho.MQTTv311
    finally:
        connection.close()


def test_close_while_connecting_leaves_no_connection(running_broker: RunningBroker) -> None:
    """A caller that gave up waiting (a cancelled ``connect_retrying``) closes the
    connection while ``connect`` still runs in its thread."""
    connections: list[BrokerConnection] = []

    class ClosedMeanwhile(paho.Client):
        def connect(self, *args: Any, **kwargs: Any) -> MQTTErrorCode:
            connections[0].close()
            return super().connect(*args, **kwargs)

    connection = BrokerConnection(_service(running_broker.port), make_client=ClosedMeanwhile)
    connections.append(connection)
    with pytest.raises(MqttError, match="closed while connecting"):
        connection.connect()
    assert not connection.connected
    with pytest.raises(MqttError, match="not open"):
        connection.publish("transcription/a1/result", b"x")


def test_publish_on_a_closed_connection_raises_with_the_topic(
    running_broker: RunningBroker,
) -> None:
    connection = BrokerConnection(_service(running_broker.port))
    with pytest.raises(MqttError, match="not open") as caught:
        connection.publish("transcription/a1/result", b"x")
    assert caught.value.topic == "transcription/a1/result"


def test_a_client_id_is_required() -> None:
    with pytest.raises(MqttError, match="client id"):
        BrokerConnection(ConnectOptions("127.0.0.1", 1883, ""))


def test_reconnect_delays_double_up_to_the_maximum() -> None:
    delays = ReconnectPolicy(0.5, 3.0).delays()
    assert list(itertools.islice(delays, 5)) == [0.5, 1.0, 2.0, 3.0, 3.0]
