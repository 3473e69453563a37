"""`voxwire up --distributed`: one command for gateway, worker and bridge on the
servers of `make services`, with the command line's settings reaching all three."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from confluent_kafka.admin import AdminClient

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import services_env, wait_for_workers
from evaluation.ports import free_port
from voxwire.core.readiness import READY_PATH
from voxwire_client import Client
from voxwire_client.config import ClientConfig, installations, load_config, save_config

pytestmark = pytest.mark.timeout(300)


def test_up_distributed_serves_on_the_given_port_in_its_namespace(tmp_path: Path) -> None:
    services = services_env()
    namespace = "u" + secrets.token_hex(4)
    port, probes = free_port(), free_port()
    env = {
        **os.environ,
        **services,
        "VOXWIRE_NAMESPACE": namespace,
        "VOXWIRE_INGEST_SESSION_EXPIRY_S": "60",
        "VOXWIRE_METRICS_PORT": str(probes),
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "VOXWIRE_CONFIG": str(tmp_path / "config" / "server.toml"),
    }
    for name in ("VOXWIRE_URL", "VOXWIRE_API_KEY", "VOXWIRE_HTTP_PORT", "VOXWIRE_DATA_DIR"):
        env.pop(name, None)
    embedded = ClientConfig(api_key="vxk_eeeeeeee_embedded", installation="sqlite:/x/v.sqlite3")
    save_config(embedded, tmp_path / "config" / "client.json")  # an earlier `make run`
    command = [sys.executable, "-m", "voxwire.cli", "up", "--distributed"]
    command += ["--http-port", str(port), "--data-dir", str(tmp_path / "data")]
    log = (tmp_path / "up.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while not _healthy(url):
            assert process.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "up.log").read_text()
            time.sleep(0.5)
        client_config = load_config(tmp_path / "config" / "client.json")
        assert client_config.url == url
        assert client_config.installation.endswith(f"?namespace={namespace}")
        _, entries = installations(tmp_path / "config" / "client.json")
        assert entries[embedded.installation] == embedded  # kept beside this one

        topics = AdminClient({"bootstrap.servers": services["VOXWIRE_KAFKA_BOOTSTRAP"]})
        names = set(topics.list_topics(timeout=10).topics)
        assert f"{namespace}.transcription.jobs" in names
        assert f"{namespace}.transcription.results" in names

        wait_for_workers(services["VOXWIRE_KAFKA_BOOTSTRAP"], namespace)
        path = EVAL_DIR / "audio" / "whisper_jfk.flac"
        api_key = client_config.api_key or ""
        with Client(url, api_key, client_config.mqtt_url, timeout=120) as client:
            result = client.transcribe(path)
        assert "country" in result.text
        for role, at in (("worker", probes), ("bridge", probes + 1)):  # one port each
            ready = httpx.get(f"http://127.0.0.1:{at}{READY_PATH}", timeout=10)
            assert ready.status_code == 200, (role, ready.text)
        assert any((tmp_path / "data").rglob("*")), "the gateway keeps audio in --data-dir"
    finally:
        roles = psutil.Process(process.pid).children()
        names = {role.cmdline()[-1] for role in roles}
        process.terminate()
        process.wait(30)
        log.close()
    assert names == {"gateway", "worker", "bridge"}
    _, alive = psutil.wait_procs(roles, timeout=30)
    assert not alive, "SIGTERM to `voxwire up` stops its roles too"


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
