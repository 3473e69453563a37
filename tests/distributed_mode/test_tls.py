"""MQTT over TLS against Mosquitto's TLS listener (a self-signed CA made by
scripts/services.sh): voxwire's own connections and the SDK's verify the broker
with that CA, and nothing connects without it."""

from __future__ import annotations

import ssl
import threading
from pathlib import Path
from urllib.parse import urlsplit

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform, services_env
from voxwire_client import Client

pytestmark = pytest.mark.timeout(300)


def _connect(url: str, *, ca_file: str | None, username: str, password: str) -> str:
    """'connected', or why not."""
    parts = urlsplit(url)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="tls-probe")
    client.username_pw_set(username, password)
    if parts.scheme == "mqtts":
        client.tls_set(ca_certs=ca_file, cert_reqs=ssl.CERT_REQUIRED)
    done = threading.Event()
    outcome: list[str] = []
    client.on_connect = lambda *a: (outcome.append(str(a[3])), done.set())
    try:
        client.connect(parts.hostname or "127.0.0.1", parts.port or 8883)
    except (ssl.SSLError, OSError) as exc:
        return f"refused: {type(exc).__name__}"
    client.loop_start()
    done.wait(5)
    client.loop_stop()
    client.disconnect()
    return "connected" if outcome == ["Success"] else f"refused: {outcome or 'no CONNACK'}"


def test_the_broker_is_verified_with_its_ca_and_not_without() -> None:
    env = services_env()
    url, ca = env["VOXWIRE_MQTTS_URL"], env["VOXWIRE_MQTT_CA_FILE"]
    user, password = env["VOXWIRE_MQTT_USERNAME"], env["VOXWIRE_MQTT_PASSWORD"]
    assert _connect(url, ca_file=ca, username=user, password=password) == "connected"
    assert "SSLCertVerificationError" in _connect(
        url, ca_file=None, username=user, password=password
    )
    assert _connect(url, ca_file=ca, username=user, password="wrong").startswith("refused")
    plain = url.replace("mqtts://", "mqtt://")  # plain MQTT to the TLS port
    assert _connect(plain, ca_file=None, username=user, password=password) != "connected"


def test_the_platform_runs_over_tls(tmp_path: Path) -> None:
    env = services_env()
    url, ca = env["VOXWIRE_MQTTS_URL"], env["VOXWIRE_MQTT_CA_FILE"]
    platform = DistributedPlatform(tmp_path, mqtt_url=url, mqtt_ca_file=ca).start()
    try:
        with Client(platform.url, platform.api_key, url, mqtt_ca_file=ca) as client:
            result = client.transcribe(EVAL_DIR / "audio" / "whisper_jfk.flac")
        assert "country" in result.text
    finally:
        platform.stop()
