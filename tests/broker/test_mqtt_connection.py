"""MqttConnection: acknowledged publishes, protocol fallback, reconnect, MQTT 5 expiry.

Most tests run against the embedded broker (MQTT 3.1.1); the MQTT 5 path runs against
Mosquitto when it is installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import paho.mqtt.client as paho
import pytest

from voxwire.broker.mqtt import MqttConnection
from voxwire.core.errors import MqttError

from .conftest import PahoClient, RunningBroker, wait_until

pytestmark = pytest.mark.timeout(40)

Make = Callable[..., PahoClient]


@pytest.fixture
def service(running_broker: RunningBroker) -> Iterator[MqttConnection]:
    connection = MqttConnection(
        "127.0.0.1",
        running_broker.port,
        client_id="bridge-1",
        username="service",
        password="service-pw",
        reconnect_delay_s=(0.1, 0.5),
    )
    connection.connect()
    yield connection
    connection.close()


def test_falls_back_to_311_at_once_and_publish_future_completes(
    running_broker: RunningBroker, make_client: Make
) -> None:
    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+") == [1]

    started = time.monotonic()
    with MqttConnection(
        "127.0.0.1",
        running_broker.port,
        client_id="bridge-1",
        username="service",
        password="service-pw",
    ) as connection:
        assert time.monotonic() - started < 2.0
        assert connection.protocol == paho.MQTTv311
        assert connection.connected
        future = connection.publish("transcription/a1/result", b"final", expiry_s=60)
        assert future.result(timeout=5) is None

    message = alice.next_message()
    assert message is not None
    assert (message.topic, message.payload, message.qos) == ("transcription/a1/result", b"final", 1)


def test_published_message_is_retained_for_late_subscribers(
    service: MqttConnection, make_client: Make
) -> None:
    futures = [service.publish("transcription/a1/progress", f"{n}%".encode()) for n in (10, 20)]
    for future in futures:
        future.result(timeout=5)
    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/progress") == [1]
    message = alice.next_message()
    assert message is not None
    assert (message.payload, message.retain) == (b"20%", True)


async def test_publish_async_awaits_the_acknowledgement(service: MqttConnection) -> None:
    await service.publish_async("transcription/a1/result", b"{}", timeout_s=5)
    await service.publish_async("transcription/a1/match", b"{}", qos=0, retain=False)


def test_invalid_topic_fails_the_future_with_the_topic(service: MqttConnection) -> None:
    future = service.publish("transcription/+/result", b"x")
    with pytest.raises(MqttError) as caught:
        future.result(timeout=1)
    assert caught.value.topic == "transcription/+/result"
    assert caught.value.code == "mqtt"


def test_wrong_password_raises_mqtt_error(running_broker: RunningBroker) -> None:
    connection = MqttConnection(
        "127.0.0.1", running_broker.port, client_id="bridge-x", username="service", password="no"
    )
    with pytest.raises(MqttError, match="refused"):
        connection.connect()
    assert not connection.connected


def test_unreachable_broker_raises_mqtt_error(running_broker: RunningBroker) -> None:
    running_broker.stop()
    connection = MqttConnection("127.0.0.1", running_broker.port, client_id="bridge-x")
    with pytest.raises(MqttError, match="cannot reach"):
        connection.connect()
    running_broker.start()  # for the fixture's teardown


def test_reconnects_after_broker_restart_and_delivers_what_was_published_meanwhile(
    running_broker: RunningBroker, service: MqttConnection, make_client: Make
) -> None:
    service.publish("transcription/a1/result", b"before").result(timeout=5)

    running_broker.stop()
    assert wait_until(lambda: not service.connected)
    during: Future[None] = service.publish("transcription/a1/result", b"during the outage")
    time.sleep(0.3)
    assert not during.done()

    running_broker.start()
    during.result(timeout=10)
    assert service.connected
    service.publish("transcription/a1/progress", b"after").result(timeout=5)

    alice = make_client("alice-1", "alice", "alice-pw", port=running_broker.port)
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+") == [1]
    received = [alice.next_message(), alice.next_message()]
    assert {(m.topic, m.payload) for m in received if m is not None} == {
        ("transcription/a1/result", b"during the outage"),
        ("transcription/a1/progress", b"after"),
    }


def test_close_fails_publishes_not_yet_acknowledged(
    running_broker: RunningBroker, service: MqttConnection
) -> None:
    running_broker.stop()
    assert wait_until(lambda: not service.connected)
    pending = service.publish("transcription/a1/result", b"never sent")
    service.close()
    with pytest.raises(MqttError, match="closed before"):
        pending.result(timeout=1)
    with pytest.raises(MqttError, match="not open"):
        service.publish("transcription/a1/result", b"after close")
    running_broker.start()


def test_mqtt5_broker_gets_persistent_session_and_message_expiry(mosquitto: int) -> None:
    with MqttConnection("127.0.0.1", mosquitto, client_id="bridge-5") as connection:
        assert connection.protocol == paho.MQTTv5
        connection.publish("transcription/a1/result", b"expires", expiry_s=2).result(timeout=5)

        late = PahoClient(mosquitto, "late-5", protocol=paho.MQTTv5)
        try:
            assert not late.connect().is_failure
            assert late.subscribe("transcription/a1/+") == [1]
            message = late.next_message()
            assert message is not None
            assert message.retain
            remaining = getattr(message.properties, "MessageExpiryInterval", None)
            assert remaining is not None
            assert 0 < remaining <= 2
        finally:
            late.close()

        time.sleep(2.5)  # the retained message expires at the broker
        later = PahoClient(mosquitto, "later-5", protocol=paho.MQTTv5)
        try:
            assert not later.connect().is_failure
            assert later.subscribe("transcription/a1/+") == [1]
            assert later.next_message(timeout=1.0) is None
        finally:
            later.close()
