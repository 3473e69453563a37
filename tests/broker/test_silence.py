"""A broker connection's liveness watch against a Mosquitto of the test's own
(and the embedded broker): an idle connection stays heard past the bound (its
keepalive pings are answered), a frozen broker (SIGSTOP: the socket stays open, nothing answers)
is reported once the bound has passed, while paho reconnects, and heard again
once it runs; a closed connection is not watched."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxwire.broker.connection import SILENT_KEEPALIVES, BrokerConnection, ConnectOptions

from .conftest import RunningBroker, mosquitto_process, wait_until

pytestmark = pytest.mark.timeout(90)

KEEPALIVE_S = 1
BOUND_S = SILENT_KEEPALIVES * KEEPALIVE_S


@pytest.fixture
def own_mosquitto(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A Mosquitto that only this test uses (it may freeze it), and its port."""
    with mosquitto_process(tmp_path) as (process, port):
        try:
            yield process, port
        finally:
            os.kill(process.pid, signal.SIGCONT)  # a frozen broker would not terminate


@pytest.fixture
def connection(
    own_mosquitto: tuple[subprocess.Popen[bytes], int],
) -> Iterator[BrokerConnection]:
    _, port = own_mosquitto
    options = ConnectOptions(
        "127.0.0.1",
        port,
        "silence-test",
        keepalive_s=KEEPALIVE_S,
        session_expiry_s=None,
        connect_timeout_s=2.0,
    )
    connection = BrokerConnection(options)
    connection.connect()
    yield connection
    connection.close()


def _idle_silences(connection: BrokerConnection) -> list[str]:
    """What the watch says while the connection idles for 3 bounds."""
    start = time.monotonic()
    seen: list[str] = []
    while time.monotonic() - start < 3 * BOUND_S:
        why = connection.silence()
        if why is not None:
            seen.append(why)
        time.sleep(0.1)
    return seen


def test_an_idle_connection_is_heard_past_the_bound(connection: BrokerConnection) -> None:
    """Nothing is published or received: only the keepalive pings and their answers
    go over the connection, and they keep it alive (paho has no PINGRESP
    callback; without the hook on its packet handling this test fails)."""
    assert connection.silence.bound_s == BOUND_S
    assert _idle_silences(connection) == []
    assert connection.connected


def test_an_idle_connection_to_the_embedded_broker_is_heard_past_the_bound(
    running_broker: RunningBroker,
) -> None:
    options = ConnectOptions(
        "127.0.0.1",
        running_broker.port,
        "silence-embedded",
        username="service",
        password="service-pw",
        keepalive_s=KEEPALIVE_S,
        session_expiry_s=None,
    )
    connection = BrokerConnection(options)
    connection.connect()
    try:
        assert _idle_silences(connection) == []
        assert connection.connected
    finally:
        connection.close()


def test_a_frozen_broker_is_reported_past_the_bound_and_heard_again_once_it_runs(
    own_mosquitto: tuple[subprocess.Popen[bytes], int], connection: BrokerConnection
) -> None:
    process, port = own_mosquitto
    assert connection.silence() is None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: connection.silence() is not None, timeout=10 * BOUND_S)
        why = connection.silence()
        assert why is not None
        assert why.startswith(f"the MQTT connection silence-test to 127.0.0.1:{port} has heard ")
        assert why.endswith(f"not even a keepalive answer (bound {BOUND_S} s)"), why
    finally:
        os.kill(process.pid, signal.SIGCONT)
    assert wait_until(lambda: connection.silence() is None, timeout=60)
    assert wait_until(lambda: connection.connected, timeout=30)


def test_a_closed_connection_is_not_watched(
    own_mosquitto: tuple[subprocess.Popen[bytes], int], connection: BrokerConnection
) -> None:
    process, _ = own_mosquitto
    connection.close()
    os.kill(process.pid, signal.SIGSTOP)
    try:
        time.sleep(BOUND_S + 1)
        assert connection.silence() is None
    finally:
        os.kill(process.pid, signal.SIGCONT)
