"""The embedded broker, seen from real paho clients: who gets in, who sees what.

Users in these tests: ``alice`` owns ``transcription/a1/...``, ``bob`` owns
``transcription/b2/...``, ``service`` (a voxwire service) may use every topic.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
import trustme

from voxwire.broker.connect import parse_connect
from voxwire.broker.embedded import EmbeddedBroker
from voxwire.broker.gate import CLIENT_BURST_BYTES, CLIENT_BYTES_PER_S, MAX_PACKET_BYTES
from voxwire.core.errors import MqttError

from .conftest import (
    USERS,
    BrokerThread,
    DictAuthenticator,
    PahoClient,
    PrefixAuthorizer,
    RunningBroker,
)

pytestmark = pytest.mark.timeout(30)

Make = Callable[..., PahoClient]
SUBACK_FAILURE = 0x80


def test_connect_without_credentials_is_refused(make_client: Make) -> None:
    client = make_client("anon-1")
    assert client.connect().getName() == "Not authorized"
    assert not client.client.is_connected()


def test_wrong_password_is_refused(make_client: Make) -> None:
    client = make_client("alice-1", "alice", "not-her-password")
    assert client.connect().getName() == "Bad user name or password"
    assert not client.client.is_connected()


def test_unknown_user_is_refused(make_client: Make) -> None:
    assert (
        make_client("mallory-1", "mallory", "x").connect().getName() == "Bad user name or password"
    )


def test_mqtt5_connect_is_refused_at_once_with_unsupported_protocol(make_client: Make) -> None:
    client = make_client("alice-5", "alice", "alice-pw", protocol=paho.MQTTv5)
    started = time.monotonic()
    assert client.connect().getName() == "Unsupported protocol version"
    assert time.monotonic() - started < 2.0  # refused, not left hanging


def test_late_subscriber_gets_retained_qos1_message(make_client: Make) -> None:
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/a1/result", b'{"seq": 7}', qos=1, retain=True)

    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+", qos=1) == [1]
    message = alice.next_message()
    assert message is not None
    assert (message.topic, message.payload) == ("transcription/a1/result", b'{"seq": 7}')
    assert message.retain
    assert message.qos == 1


def test_live_messages_arrive_with_qos1_and_without_retain_flag(make_client: Make) -> None:
    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+") == [1]
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/a1/progress", b"50%", qos=1, retain=True)
    message = alice.next_message()
    assert message is not None
    assert (message.payload, message.qos, message.retain) == (b"50%", 1, False)


def test_subscribing_to_another_users_session_gets_failure_suback(make_client: Make) -> None:
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/b2/result", b"bob's retained", retain=True)

    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/b2/+") == [SUBACK_FAILURE]
    assert alice.subscribe("#") == [SUBACK_FAILURE]
    service.publish("transcription/b2/result", b"bob's live")
    assert alice.next_message(timeout=1.0) is None


def test_retained_messages_of_others_are_not_sent_on_connect(make_client: Make) -> None:
    """amqtt sends every new client the retained messages of anyone's subscriptions."""
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/b2/result", b"bob's retained", retain=True)
    bob = make_client("bob-1", "bob", "bob-pw")
    assert not bob.connect().is_failure
    assert bob.subscribe("transcription/b2/+") == [1]
    assert bob.next_message() is not None

    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.next_message(timeout=1.0) is None


def test_publishing_into_another_users_session_is_dropped(make_client: Make) -> None:
    bob = make_client("bob-1", "bob", "bob-pw")
    assert not bob.connect().is_failure
    assert bob.subscribe("transcription/b2/+") == [1]
    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    alice.publish("transcription/b2/result", b"forged", retain=True)
    assert bob.next_message(timeout=1.0) is None

    late = make_client("bob-2", "bob", "bob-pw")
    assert not late.connect().is_failure
    assert late.subscribe("transcription/b2/+") == [1]
    assert late.next_message(timeout=1.0) is None  # nothing retained either


def test_another_users_client_id_is_refused_and_owner_stays(make_client: Make) -> None:
    bob = make_client("bob-1", "bob", "bob-pw", clean_session=False)
    assert not bob.connect().is_failure
    assert bob.subscribe("transcription/b2/+") == [1]

    assert (
        make_client("bob-1", "alice", "alice-pw").connect().getName()
        == "Client identifier not valid"
    )
    assert make_client("bob-1").connect().getName() == "Not authorized"  # no kick either
    time.sleep(0.3)
    assert bob.client.is_connected()
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/b2/result", b"still bob's")
    message = bob.next_message()
    assert message is not None
    assert message.payload == b"still bob's"


def test_persistent_session_gets_qos1_messages_published_while_offline(make_client: Make) -> None:
    alice = make_client("alice-p", "alice", "alice-pw", clean_session=False)
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+") == [1]
    alice.close()
    time.sleep(0.3)  # let the broker see the disconnect
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/a1/result", b"while you were away")

    again = make_client("alice-p", "alice", "alice-pw", clean_session=False)
    assert not again.connect().is_failure
    message = again.next_message()
    assert message is not None
    assert (message.payload, message.qos) == (b"while you were away", 1)


def test_websocket_listener_on_path_mqtt(make_client: Make, running_broker: RunningBroker) -> None:
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/a1/result", b"over websockets", retain=True)

    browser = make_client(
        "alice-ws", "alice", "alice-pw", port=running_broker.ws_port, transport="websockets"
    )
    assert not browser.connect().is_failure
    assert browser.subscribe("transcription/a1/+") == [1]
    message = browser.next_message()
    assert message is not None
    assert (message.payload, message.retain) == (b"over websockets", True)
    anonymous = make_client("anon-ws", port=running_broker.ws_port, transport="websockets")
    assert anonymous.connect().getName() == "Not authorized"


def test_tls_websocket_listener_takes_wss_with_the_ca_and_refuses_plain_ws(
    tmp_path: Path,
) -> None:
    """With a certificate the WebSocket listener speaks only TLS (wss://): a
    client that trusts the issuing CA gets in and receives, one without TLS
    does not get a CONNACK."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    leaf.private_key_pem.write_to_path(str(key))
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(ca_file))
    thread = BrokerThread()
    broker = EmbeddedBroker(
        DictAuthenticator(USERS), PrefixAuthorizer(), tcp_port=0, ws_port=0, ws_tls=(cert, key)
    )
    thread.call(broker.start())
    clients: list[PahoClient] = []
    try:
        assert broker.ws_url == f"wss://127.0.0.1:{broker.ws_port}/mqtt"
        port = broker.ws_port
        assert port is not None
        service = PahoClient(broker.tcp_port, "svc-tls", "service", "service-pw")
        browser = PahoClient(port, "alice-wss", "alice", "alice-pw", transport="websockets")
        browser.client.tls_set(ca_certs=str(ca_file))
        plain = PahoClient(port, "alice-ws", "alice", "alice-pw", transport="websockets")
        clients += [service, browser, plain]
        assert not service.connect().is_failure
        service.publish("transcription/a1/result", b"over wss", retain=True)
        assert not browser.connect().is_failure
        assert browser.subscribe("transcription/a1/+") == [1]
        message = browser.next_message()
        assert message is not None and message.payload == b"over wss"
        with pytest.raises(paho.WebsocketConnectionError):
            plain.connect(timeout=3)
    finally:
        for client in clients:
            client.close()
        thread.call(broker.stop())
        thread.close()


def test_port_zero_binds_free_ports_and_reports_urls(running_broker: RunningBroker) -> None:
    broker = running_broker.broker
    assert broker.running
    assert broker.tcp_port > 0
    assert broker.ws_port not in (None, 0)
    assert broker.tcp_url == f"mqtt://127.0.0.1:{broker.tcp_port}"
    assert broker.ws_url == f"ws://127.0.0.1:{broker.ws_port}/mqtt"


async def test_port_in_use_raises_mqtt_error(running_broker: RunningBroker) -> None:
    clash = EmbeddedBroker(
        DictAuthenticator(USERS), PrefixAuthorizer(), tcp_port=0, ws_port=running_broker.ws_port
    )
    with pytest.raises(MqttError, match="cannot start"):
        await clash.start()
    assert not clash.running


async def test_async_context_manager_starts_and_stops() -> None:
    async with EmbeddedBroker(
        DictAuthenticator(USERS), PrefixAuthorizer(), tcp_port=0, ws_port=None
    ) as broker:
        assert broker.running
        assert broker.ws_url is None
        port = broker.tcp_port
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
    assert not broker.running
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


def test_parse_connect_reads_credentials_and_will() -> None:
    client_id, will_topic, will, user, password = b"c1", b"w/t", b"bye", b"alice", b"pw"

    def text(value: bytes) -> bytes:
        return len(value).to_bytes(2, "big") + value

    flags = 0x80 | 0x40 | 0x04 | 0x02
    body = text(b"MQTT") + bytes([4, flags, 0, 30])
    body += b"".join(text(v) for v in (client_id, will_topic, will, user, password))
    connect = parse_connect(body)
    assert (connect.level, connect.client_id, connect.username, connect.password) == (
        4,
        "c1",
        "alice",
        "pw",
    )
    assert parse_connect(text(b"MQTT") + bytes([5, 0x02, 0, 30, 0])).level == 5


class _BrokenRules:
    """An authenticator and authorizer whose backend is down."""

    async def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> None:
        raise ConnectionError("user database unreachable")

    async def allow(self, principal: object, topic: str, action: str) -> bool:
        raise ConnectionError("policy service unreachable")


@contextmanager
def _broker_with(authenticator: Any, authorizer: Any) -> Iterator[EmbeddedBroker]:
    thread = BrokerThread()
    broker = EmbeddedBroker(authenticator, authorizer, tcp_port=0, ws_port=None)
    thread.call(broker.start())
    try:
        yield broker
    finally:
        thread.call(broker.stop())
        thread.close()


def test_failing_authenticator_refuses_with_server_unavailable() -> None:
    with _broker_with(_BrokenRules(), PrefixAuthorizer()) as broker:
        client = PahoClient(broker.tcp_port, "alice-1", "alice", "alice-pw")
        assert client.connect().getName() == "Server unavailable"


def test_failing_authorizer_denies() -> None:
    with _broker_with(DictAuthenticator(USERS), _BrokenRules()) as broker:
        alice = PahoClient(broker.tcp_port, "alice-1", "alice", "alice-pw")
        assert not alice.connect().is_failure
        try:
            assert alice.subscribe("transcription/a1/+") == [SUBACK_FAILURE]
        finally:
            alice.close()


def test_no_message_is_lost_while_other_clients_subscribe(make_client: Make) -> None:
    """Subscriptions changing during a broadcast must not drop the message for anyone."""
    service = make_client("svc-flood", "service", "service-pw")
    assert service.connect().value == 0
    watcher = make_client("alice-watch", "alice", "alice-pw")
    assert watcher.connect().value == 0
    assert watcher.subscribe("transcription/a1/+") == [1]
    for i in range(10):  # offline persistent sessions: broadcasts queue for them (and await)
        offline = make_client(f"alice-away-{i}", "alice", "alice-pw", clean_session=False)
        offline.connect()
        offline.subscribe("transcription/a1/+")
        offline.close()
    churn = [make_client(f"alice-churn-{i}", "alice", "alice-pw") for i in range(20)]
    for client in churn:
        client.connect()
    count = 300
    for i in range(count):
        service.client.publish("transcription/a1/progress", str(i).encode(), qos=1)
        if i % 15 == 0:
            churn[i // 15].client.subscribe(f"transcription/a1/extra{i}", qos=1)
    received = set()
    deadline = time.monotonic() + 20
    while len(received) < count and time.monotonic() < deadline:
        message = watcher.next_message(timeout=1)
        if message is not None:
            received.add(int(message.payload))
    assert len(received) == count, f"lost {count - len(received)} of {count}"


def test_an_oversized_packet_ends_only_its_own_connection(make_client: Make) -> None:
    alice = make_client("alice-1", "alice", "alice-pw")
    assert not alice.connect().is_failure
    assert alice.subscribe("transcription/a1/+") == [1]
    mallory = make_client("alice-2", "alice", "alice-pw")
    assert not mallory.connect().is_failure
    disconnected = threading.Event()
    mallory.client.on_disconnect = lambda *_: disconnected.set()
    mallory.client.publish("audio/a1/chunk/0", b"\x00" * (MAX_PACKET_BYTES + 1), qos=1)
    assert disconnected.wait(10), "the broker kept a client that sent an oversized packet"
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    service.publish("transcription/a1/result", b"still here")
    message = alice.next_message()
    assert message is not None and message.payload == b"still here"


def test_a_client_sending_too_fast_is_slowed_down_not_dropped_nor_in_the_way(
    make_client: Make, running_broker: RunningBroker
) -> None:
    """Past CLIENT_BYTES_PER_S (after a burst), the broker reads a user's
    connection more slowly: every message still arrives, and another client's
    message is not held behind the flood."""
    service = make_client("svc-1", "service", "service-pw")
    assert not service.connect().is_failure
    assert service.subscribe("#") == [1]
    flooder = make_client("alice-1", "alice", "alice-pw")
    assert not flooder.connect().is_failure
    neighbour = make_client("bob-1", "bob", "bob-pw")
    assert not neighbour.connect().is_failure
    chunk = b"\x00" * (64 * 1024)
    count = (CLIENT_BURST_BYTES + CLIENT_BYTES_PER_S) // len(chunk) + 4
    infos = [flooder.client.publish("transcription/a1/flood", chunk, qos=1) for _ in range(count)]
    time.sleep(0.5)  # the burst is spent; the broker now reads the flood slowly
    neighbour.publish("transcription/b2/hello", b"hi")
    received = []
    while len(received) < count + 1:
        message = service.next_message(timeout=30)
        assert message is not None, f"only {len(received)} of {count + 1} messages arrived"
        received.append(message.topic)
    for info in infos:
        info.wait_for_publish(timeout=30)
    assert received.count("transcription/a1/flood") == count
    assert received.index("transcription/b2/hello") < len(received) - 1
    assert running_broker.broker.throttled > 0
