"""Fixtures for the broker tests: an EmbeddedBroker on free ports, in its own thread.

paho clients are threaded and block, so the broker gets its own event loop in a
background thread; tests drive it with plain calls (``start``, ``stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.reasoncodes import ReasonCode

from evaluation.ports import free_port
from voxwire.access.principal import Action, Principal
from voxwire.broker.embedded import EmbeddedBroker

T = TypeVar("T")

USERS = {
    "alice": ("alice-pw", Principal("alice")),
    "bob": ("bob-pw", Principal("bob")),
    "service": ("service-pw", Principal("service", is_service=True)),
}
#: The topic tree each user may use; services may use everything.
USER_PREFIX = {"alice": "transcription/a1/", "bob": "transcription/b2/"}


class DictAuthenticator:
    """Users from a dict of ``name -> (password, principal)``."""

    def __init__(self, users: dict[str, tuple[str, Principal]]) -> None:
        self.users = users

    async def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> Principal | None:
        entry = self.users.get(username or "")
        if entry is None or password != entry[0]:
            return None
        return entry[1]


class PrefixAuthorizer:
    """Services may do anything; a user only below its own prefix (wildcards included)."""

    async def allow(self, principal: Principal, topic: str, action: Action) -> bool:
        if principal.is_service:
            return True
        prefix = USER_PREFIX.get(principal.name)
        return prefix is not None and topic.startswith(prefix)


class BrokerThread:
    """Runs coroutines on an event loop that lives in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 15.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@dataclass
class RunningBroker:
    """An EmbeddedBroker started in a BrokerThread; ``restart`` keeps the same ports."""

    thread: BrokerThread
    broker: EmbeddedBroker

    @property
    def port(self) -> int:
        return self.broker.tcp_port

    @property
    def ws_port(self) -> int:
        port = self.broker.ws_port
        assert port is not None
        return port

    def stop(self) -> None:
        self.thread.call(self.broker.stop())

    def start(self) -> None:
        """Start a fresh broker on the ports the previous one had."""
        self.broker = EmbeddedBroker(
            DictAuthenticator(USERS),
            PrefixAuthorizer(),
            tcp_port=self.port,
            ws_port=self.ws_port,
            connect_timeout_s=3.0,
        )
        self.thread.call(self.broker.start())


@pytest.fixture
def running_broker() -> Iterator[RunningBroker]:
    thread = BrokerThread()
    broker = EmbeddedBroker(
        DictAuthenticator(USERS), PrefixAuthorizer(), tcp_port=0, ws_port=0, connect_timeout_s=3.0
    )
    thread.call(broker.start())
    running = RunningBroker(thread, broker)
    try:
        yield running
    finally:
        running.stop()
        thread.close()


class PahoClient:
    """A real paho client as a user's device or browser would run it, with blocking helpers."""

    def __init__(
        self,
        port: int,
        client_id: str,
        username: str | None = None,
        password: str | None = None,
        *,
        transport: Literal["tcp", "websockets"] = "tcp",
        protocol: MQTTProtocolVersion = paho.MQTTv311,
        clean_session: bool = True,
    ) -> None:
        self.port = port
        self.protocol = protocol
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=protocol,
            transport=transport,
            clean_session=None if protocol == paho.MQTTv5 else clean_session,
        )
        if transport == "websockets":
            self.client.ws_set_options(path="/mqtt")
        if username is not None:
            self.client.username_pw_set(username, password)
        self.client.reconnect_delay_set(60, 60)  # tests reconnect explicitly
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self._connack: queue.Queue[ReasonCode] = queue.Queue()
        self._subacks: queue.Queue[list[ReasonCode]] = queue.Queue()
        self.client.on_connect = lambda _c, _u, _f, rc, _p: self._connack.put(rc)
        self.client.on_subscribe = lambda _c, _u, _m, rcs, _p: self._subacks.put(rcs)
        self.client.on_message = lambda _c, _u, msg: self.messages.put(msg)

    def connect(self, timeout: float = 5.0) -> ReasonCode:
        """Connect and return the CONNACK reason; a refused client stays disconnected."""
        if self.protocol == paho.MQTTv5:
            self.client.connect("127.0.0.1", self.port, keepalive=10, clean_start=False)
        else:
            self.client.connect("127.0.0.1", self.port, keepalive=10)
        self.client.loop_start()
        reason = self._connack.get(timeout=timeout)
        if reason.is_failure:
            self.client.disconnect()
            self.client.loop_stop()
        return reason

    def subscribe(self, topic_filter: str, qos: int = 1, timeout: float = 5.0) -> list[int]:
        """Subscribe and return the SUBACK return codes (0x80 = refused)."""
        self.client.subscribe(topic_filter, qos=qos)
        return [int(rc.value) for rc in self._subacks.get(timeout=timeout)]

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        info.wait_for_publish(timeout=5)
        assert info.is_published()

    def next_message(self, timeout: float = 3.0) -> paho.MQTTMessage | None:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def make_client(running_broker: RunningBroker) -> Iterator[Callable[..., PahoClient]]:
    """A factory of PahoClients on the running broker's TCP port; all closed afterwards."""
    clients: list[PahoClient] = []

    def make(
        client_id: str, username: str | None = None, password: str | None = None, **options: Any
    ) -> PahoClient:
        options.setdefault("port", running_broker.port)
        client = PahoClient(client_id=client_id, username=username, password=password, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def mosquitto_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A Mosquitto 2 broker (MQTT 5) on a free port and its process, when Mosquitto
    is installed (a test may freeze it: it is its own)."""
    binary = shutil.which("mosquitto")
    if binary is None:
        pytest.skip("mosquitto is not installed")
    port = free_port()
    config = tmp_path / "mosquitto.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    process = subprocess.Popen([binary, "-c", str(config)], stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _accepts(port), timeout=5), "mosquitto did not start"
        yield process, port
    finally:
        process.terminate()
        process.wait(5)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[int]:
    """A Mosquitto 2 broker (MQTT 5) on a free port, when Mosquitto is installed."""
    with mosquitto_process(tmp_path) as (_, port):
        yield port


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True
