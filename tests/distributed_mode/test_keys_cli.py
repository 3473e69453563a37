"""`voxwire keys --distributed` as an operator runs it: keys in PostgreSQL (the
namespace's schema), registered with Mosquitto's dynamic security; a key revoked
with the CLI loses its open MQTT connection, cannot connect again, and is refused
by the gateway's EMQX hooks."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import SecretStr

from evaluation.distributed import services_env
from tests.gateway.gateway_app import gateway_client
from tests.store import drop_schema
from voxwire.access.tokens import TokenIssuer
from voxwire.cli.installation import client_key, installation_name
from voxwire.core.config import FLAT_NAMES, Settings
from voxwire.store.postgres import PostgresStore
from voxwire_client.config import ClientConfig, save_config

pytestmark = pytest.mark.timeout(180)

HOOK = "hook-secret-for-tests"


@pytest.fixture
def operator_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The servers' settings in the environment, as `make run-distributed` has them,
    in a namespace of this test's own (its PostgreSQL schema dropped afterwards)."""
    namespace = "k" + secrets.token_hex(4)
    env = {
        **os.environ,
        **services_env(),
        "VOXWIRE_NAMESPACE": namespace,
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "COLUMNS": "200",
    }
    env.pop("VOXWIRE_MODE", None)
    yield env
    asyncio.run(drop_schema(namespace))


def _voxwire(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxwire.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


class Device:
    """A paho client connected with an API key, as a device would be."""

    def __init__(self, mqtt_url: str, key_id: str, key: str) -> None:
        parts = urlsplit(mqtt_url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 1883)
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id=f"dev-{key_id}", protocol=paho.MQTTv5
        )
        self.client.username_pw_set(key_id, key)
        self.client.reconnect_delay_set(60, 60)  # no reconnect behind the test's back
        self.connack: list[paho.ReasonCode] = []
        self.connected = threading.Event()
        self.dropped = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda *_: self.dropped.set()

    def _on_connect(self, *args: object) -> None:
        reason = args[3]
        assert isinstance(reason, paho.ReasonCode)
        self.connack.append(reason)
        self.connected.set()

    def connect(self) -> paho.ReasonCode:
        self.connected.clear()
        self.client.connect(*self.address, keepalive=30)
        self.client.loop_start()
        assert self.connected.wait(10), "no CONNACK"
        return self.connack[-1]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


async def _emqx_authn(namespace: str, dsn: str, tmp: Path, key_id: str, key: str) -> str:
    """What the gateway's EMQX authentication hook answers, on the namespace's store."""
    store = await PostgresStore.open(dsn, schema=namespace, timeout=10)
    try:
        hooks = {"hook_secret": SecretStr(HOOK), "mqtt_password": SecretStr("x")}
        async with gateway_client(tmp, store, TokenIssuer(b"t" * 32), **hooks) as client:  # type: ignore[arg-type]
            body = {"clientid": "c1", "username": key_id, "password": key}
            answer = await client.post(
                "/internal/emqx/authn", json=body, headers={"Authorization": f"Bearer {HOOK}"}
            )
            authz = {"clientid": "c1", "username": key_id, "topic": f"query/{key_id}/q1/request"}
            allowed = await client.post(
                "/internal/emqx/authz",
                json={**authz, "action": "publish"},
                headers={"Authorization": f"Bearer {HOOK}"},
            )
        return f"{answer.json()['result']}/{allowed.json()['result']}"
    finally:
        await store.close()


def test_a_key_revoked_with_the_cli_is_cut_off_by_the_broker(
    operator_env: dict[str, str], tmp_path: Path
) -> None:
    env = operator_env
    created = _voxwire(env, "keys", "create", "--distributed", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key_id = re.search(r"key id (\w+)", created.stdout)
    key = re.search(r"vxk_\w+_[\w-]+", created.stdout)
    assert key_id and key, created.stdout
    key_id, key = key_id.group(1), key.group(0)
    assert f"?namespace={env['VOXWIRE_NAMESPACE']}" in created.stdout  # says where it went

    listed = _voxwire(env, "keys", "list", "--distributed")
    assert listed.returncode == 0, listed.stderr
    assert key_id in listed.stdout
    embedded = _voxwire(env, "keys", "list")  # the embedded store is another one
    assert embedded.returncode == 0, embedded.stderr
    assert key_id not in embedded.stdout and "sqlite:" in embedded.stdout

    namespace, dsn = env["VOXWIRE_NAMESPACE"], env["VOXWIRE_POSTGRES_DSN"]
    assert asyncio.run(_emqx_authn(namespace, dsn, tmp_path, key_id, key)) == "allow/allow"
    device = Device(env["VOXWIRE_MQTT_URL"], key_id, key)
    try:
        assert not device.connect().is_failure
        revoked = _voxwire(env, "keys", "revoke", key_id, "--distributed")
        assert revoked.returncode == 0, revoked.stderr
        assert device.dropped.wait(30), "Mosquitto kept the revoked key's connection open"
    finally:
        device.close()

    again = Device(env["VOXWIRE_MQTT_URL"], key_id, key)
    try:
        assert again.connect().is_failure, "Mosquitto let the revoked key connect again"
    finally:
        again.close()
    assert asyncio.run(_emqx_authn(namespace, dsn, tmp_path, key_id, key)) == "deny/deny"

    twice = _voxwire(env, "keys", "revoke", key_id, "--distributed")
    assert twice.returncode == 1 and "no active key" in twice.stderr


def test_an_unreachable_database_says_what_to_do(operator_env: dict[str, str]) -> None:
    env = {**operator_env, "VOXWIRE_POSTGRES_DSN": "postgresql://voxwire:x@127.0.0.1:9/voxwire"}
    result = _voxwire(env, "keys", "list", "--distributed")
    assert result.returncode == 1
    assert "cannot connect to PostgreSQL" in result.stderr
    assert "Connection refused" in result.stderr  # the reason, said once
    assert result.stderr.count("Connection refused") == 1
    assert "make services" in result.stderr and "services.sh env" in result.stderr


async def test_up_distributed_keeps_its_key_until_it_is_revoked(
    operator_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `voxwire up --distributed` puts in the client config: a new key the
    first time, the same key at every later start, a new one once it is revoked."""
    from voxwire.platform import build

    monkeypatch.setenv("VOXWIRE_CONFIG_DIR", operator_env["VOXWIRE_CONFIG_DIR"])
    monkeypatch.delenv("VOXWIRE_API_KEY", raising=False)
    names = {*FLAT_NAMES, "namespace", "data_dir"}
    values = {k[len("VOXWIRE_") :].lower(): v for k, v in operator_env.items()}
    settings = Settings(mode="distributed", **{k: v for k, v in values.items() if k in names})

    async def start() -> tuple[str, bool]:
        async with build(settings) as platform:
            key, new = await client_key(platform)
        save_config(ClientConfig(api_key=key, installation=installation_name(settings)))
        return key, new is not None

    first, created = await start()
    assert created
    assert await start() == (first, False)
    key_id = first.split("_")[1]
    revoked = await asyncio.to_thread(
        _voxwire, operator_env, "keys", "revoke", key_id, "--distributed"
    )
    assert revoked.returncode == 0, revoked.stderr
    second, created = await start()
    assert created and second != first


def test_a_device_key_is_created_listed_with_its_role_and_revoked(
    operator_env: dict[str, str], tmp_path: Path
) -> None:
    env = operator_env
    created = _voxwire(env, "keys", "create", "--distributed", "--device", "kitchen-mic")
    assert created.returncode == 0, created.stderr
    found = re.search(r"device key id (\w+) \(kitchen-mic\)", created.stdout)
    key = re.search(r"vxk_\w+_[\w-]+", created.stdout)
    assert found and key, created.stdout
    key_id, key_text = found.group(1), key.group(0)

    listed = _voxwire(env, "keys", "list", "--distributed")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if key_id in line)
    assert "device" in row and "kitchen-mic" in row, listed.stdout

    device = Device(env["VOXWIRE_MQTT_URL"], key_id, key_text)
    try:
        assert not device.connect().is_failure  # Mosquitto knows it
    finally:
        device.close()
    namespace, dsn = env["VOXWIRE_NAMESPACE"], env["VOXWIRE_POSTGRES_DSN"]
    assert asyncio.run(_emqx_authn(namespace, dsn, tmp_path, key_id, key_text)) == "allow/allow"
    revoked = _voxwire(env, "keys", "revoke", key_id, "--distributed")
    assert revoked.returncode == 0, revoked.stderr
    assert asyncio.run(_emqx_authn(namespace, dsn, tmp_path, key_id, key_text)) == "deny/deny"
    again = Device(env["VOXWIRE_MQTT_URL"], key_id, key_text)
    try:
        assert again.connect().is_failure, "Mosquitto let the revoked device key connect"
    finally:
        again.close()

    nameless = _voxwire(env, "keys", "create", "--distributed", "--device", " ")
    assert nameless.returncode == 1 and "--device needs a name" in nameless.stderr
