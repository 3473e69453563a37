"""DynsecAccess against Mosquitto's dynamic-security plugin: keys, sessions and
tokens become clients, roles and ACLs the broker enforces; command errors are
MqttError with the control topic; 'already exists' is accepted.

Runs a Mosquitto of its own with the plugin, when both are installed.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from evaluation.ports import free_port
from voxwire.access.tokens import SessionToken
from voxwire.broker.dynsec import CONTROL_TOPIC, DynsecAccess, key_role_name
from voxwire.core.errors import MqttError

from .conftest import PahoClient, wait_until

pytestmark = pytest.mark.timeout(40)

PLUGINS = (
    "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so",
    "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
    "/usr/lib/mosquitto_dynamic_security.so",
    "/usr/local/lib/mosquitto_dynamic_security.so",
)
DENY_ALL = {
    "defaultACLAccess": {
        "publishClientSend": False,
        "publishClientReceive": False,
        "subscribe": False,
        "unsubscribe": True,
    },
    "clients": [],
    "groups": [],
    "roles": [],
}


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def dynsec_broker(tmp_path: Path) -> Iterator[int]:
    """Mosquitto with the dynamic-security plugin (default deny); the service user
    comes from a password file and may use the control topic."""
    binary = shutil.which("mosquitto")
    passwd = shutil.which("mosquitto_passwd")
    plugin = next((p for p in PLUGINS if Path(p).is_file()), None)
    if binary is None or passwd is None or plugin is None:
        pytest.skip("mosquitto with its dynamic-security plugin is not installed")
    subprocess.run(
        [passwd, "-c", "-b", str(tmp_path / "passwd"), "service", "service-pw"], check=True
    )
    (tmp_path / "acl").write_text(
        "user service\ntopic readwrite #\ntopic readwrite $CONTROL/dynamic-security/#\n"
    )
    (tmp_path / "dynsec.json").write_text(json.dumps(DENY_ALL))
    port = free_port()
    config = tmp_path / "mosquitto.conf"
    config.write_text(
        "user root\nper_listener_settings false\nallow_anonymous false\npersistence false\n"
        f"password_file {tmp_path / 'passwd'}\nacl_file {tmp_path / 'acl'}\n"
        f"plugin {plugin}\nplugin_opt_config_file {tmp_path / 'dynsec.json'}\n"
        f"listener {port} 127.0.0.1\n"
    )
    process = subprocess.Popen([binary, "-c", str(config)], stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _accepts(port), timeout=5), "mosquitto did not start"
        yield port
    finally:
        process.terminate()
        process.wait(5)


@pytest.fixture
def access(dynsec_broker: int) -> Iterator[DynsecAccess]:
    dynsec = DynsecAccess("127.0.0.1", dynsec_broker, "service", "service-pw", timeout_s=5.0)
    dynsec.connect()
    yield dynsec
    dynsec.close()


def _client(port: int, username: str, password: str) -> PahoClient:
    return PahoClient(port, f"c-{username}", username, password, protocol=paho.MQTTv5)


async def test_a_key_becomes_a_client_that_follows_granted_sessions(
    access: DynsecAccess, dynsec_broker: int
) -> None:
    await access.add_key("t1", "k1", "secret-1")
    await access.add_key("t1", "k1", "secret-1")  # 'already exists' is no error
    service = PahoClient(dynsec_broker, "svc", "service", "service-pw", protocol=paho.MQTTv5)
    device = _client(dynsec_broker, "k1", "secret-1")
    try:
        assert not service.connect().is_failure
        assert not device.connect().is_failure
        device.subscribe("transcription/s1/#")
        service.publish("transcription/s1/result", b"before the grant")
        assert device.next_message(timeout=0.5) is None

        await access.grant_session("t1", "s1")
        device.subscribe("transcription/s1/#")
        service.publish("transcription/s1/result", b"after the grant")
        message = device.next_message()
        assert message is not None
        assert message.payload == b"after the grant"
    finally:
        device.close()
        service.close()

    await access.remove_key("k1")
    assert _client(dynsec_broker, "k1", "secret-1").connect().is_failure


async def test_a_key_made_before_a_topic_was_added_gets_it_when_its_role_is_completed(
    access: DynsecAccess, dynsec_broker: int
) -> None:
    own = key_role_name("k2")  # as an older version made it: searches only
    access.command("createRole", rolename=own)
    access.command(
        "addRoleACL", rolename=own, acltype="publishClientSend", topic="query/k2/+/request",
        allow=True, priority=0,
    )  # fmt: skip
    access.command("createClient", username="k2", password="secret-2", roles=[{"rolename": own}])
    service = PahoClient(dynsec_broker, "svc2", "service", "service-pw", protocol=paho.MQTTv5)
    device = _client(dynsec_broker, "k2", "secret-2")
    try:
        assert not service.connect().is_failure
        assert not device.connect().is_failure
        service.subscribe("query/+/+/part/+")
        device.publish("query/k2/rec/part/0", b"refused")
        assert service.next_message(timeout=0.5) is None

        await access.complete_key_roles(["k2"])
        await access.complete_key_roles(["k2"])  # what the role has is left as is
        device.publish("query/k2/rec/part/0", b"part 0")
        message = service.next_message()
        assert message is not None and message.payload == b"part 0"
    finally:
        device.close()
        service.close()


async def test_a_device_key_follows_only_the_sessions_it_opened(
    access: DynsecAccess, dynsec_broker: int
) -> None:
    """A device key has no tenant role: of its tenant's sessions it reaches only
    those granted to it, while the tenant's own keys reach them all."""
    await access.add_key("t1", "d1", "secret-d1", device=True)
    await access.add_key("t1", "d2", "secret-d2", device=True)
    await access.add_key("t1", "k1", "secret-1")
    await access.grant_session("t1", "s1", device_key="d1")
    await access.grant_session("t1", "s2", device_key="d2")
    service = PahoClient(dynsec_broker, "svc", "service", "service-pw", protocol=paho.MQTTv5)
    d1, d2 = _client(dynsec_broker, "d1", "secret-d1"), _client(dynsec_broker, "d2", "secret-d2")
    tenant_key = _client(dynsec_broker, "k1", "secret-1")
    clients = (service, d1, d2, tenant_key)
    try:
        for client in clients:
            assert not client.connect().is_failure
        for client in (d1, d2, tenant_key):
            client.subscribe("transcription/s1/#")
        service.publish("transcription/s1/result", b"for d1")
        for client in (d1, tenant_key):
            message = client.next_message()
            assert message is not None and message.payload == b"for d1"
        assert d2.next_message(timeout=0.5) is None  # d1's session: never delivered to d2

        service.subscribe("audio/s1/#")
        d2.publish("audio/s1/control", b"from d2")
        d1.publish("audio/s1/control", b"from d1")
        message = service.next_message()
        assert message is not None and message.payload == b"from d1"
        assert service.next_message(timeout=0.5) is None
    finally:
        for client in clients:
            client.close()

    await access.remove_key("d1")
    assert _client(dynsec_broker, "d1", "secret-d1").connect().is_failure


async def test_expired_tokens_are_removed(access: DynsecAccess, dynsec_broker: int) -> None:
    expired = SessionToken("tok-a", "t1", frozenset({"s1"}), expires_at=100, token_id="a")
    live = SessionToken("tok-b", "t1", frozenset({"s2"}), expires_at=10**10, token_id="b")
    await access.add_token(expired)
    await access.add_token(live)
    viewer = _client(dynsec_broker, live.username, live.token)
    try:
        assert not viewer.connect().is_failure
    finally:
        viewer.close()

    assert await access.remove_expired_tokens(now=1000) == 1
    assert _client(dynsec_broker, expired.username, expired.token).connect().is_failure


def test_a_command_error_raises_with_the_control_topic(access: DynsecAccess) -> None:
    with pytest.raises(MqttError, match="deleteRole failed") as caught:
        access.command("deleteRole", rolename="no-such-role")
    assert caught.value.topic == CONTROL_TOPIC


def test_no_answer_in_time_raises(mosquitto: int) -> None:
    dynsec = DynsecAccess("127.0.0.1", mosquitto, "service", "any", timeout_s=0.5)
    dynsec.connect()  # a broker without the plugin: nobody answers
    try:
        with pytest.raises(MqttError, match="no answer") as caught:
            dynsec.command("listClients", verbose=False, count=-1, offset=0)
        assert caught.value.topic == CONTROL_TOPIC
    finally:
        dynsec.close()


def test_wrong_password_raises_at_once(dynsec_broker: int) -> None:
    dynsec = DynsecAccess("127.0.0.1", dynsec_broker, "service", "wrong", timeout_s=5.0)
    with pytest.raises(MqttError, match="did not accept the dynsec admin connection"):
        dynsec.connect()


def test_a_command_after_close_raises(access: DynsecAccess) -> None:
    access.close()
    with pytest.raises(MqttError, match="not open"):
        access.command("createRole", rolename="tenant-t1")
