"""The distributed platform for tests and benchmarks: gateway, workers and
bridge as real processes against the servers of `scripts/services.sh`
(Mosquitto, Kafka, PostgreSQL, Redis), isolated from other runs by a namespace
(Kafka topic and group prefix, PostgreSQL schema, Redis prefix)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from evaluation.ports import free_port
from voxwire.core.config import Settings

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "scripts" / "services.sh"


def services_env() -> dict[str, str]:
    """The servers' settings; when they are down, the test asking fails (in CI) or
    is skipped (elsewhere), and a benchmark stops with the same message."""
    status = subprocess.run(
        [str(SERVICES), "status", "mosquitto", "kafka", "postgres", "redis"],
        capture_output=True,
        text=True,
        check=False,
    )
    if status.returncode != 0:
        message = f"distributed services are not running (run `make services`):\n{status.stderr}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = subprocess.run([str(SERVICES), "env"], capture_output=True, text=True, check=True)
    env = {}
    for line in out.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.startswith("VOXWIRE_"):
            env[name] = value
    return env


class DistributedPlatform:
    """Processes: bridge, N workers, gateway; logs under ``log_dir``."""

    def __init__(self, tmp: Path, *, workers: int = 1, **settings: str) -> None:
        self.namespace = "t" + secrets.token_hex(4)
        self.env = {
            **os.environ,
            **services_env(),
            "VOXWIRE_NAMESPACE": self.namespace,
            "VOXWIRE_HTTP_PORT": str(free_port()),
            "VOXWIRE_SHARED_DIR": str(tmp / "shared"),
            "VOXWIRE_DATA_DIR": str(tmp / "data"),
            "VOXWIRE_CONFIG": str(tmp / "server.toml"),
            # the namespace is gone after the test: its bridge's session must not collect audio
            "VOXWIRE_INGEST_SESSION_EXPIRY_S": "60",
            **{f"VOXWIRE_{k.upper()}": v for k, v in settings.items()},
        }
        self.log_dir = tmp / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.own_settings: dict[str, dict[str, str]] = {}
        """Each process's own settings (:meth:`spawn`), kept for :meth:`restart`."""
        self.worker_count = workers
        self.api_key = ""
        self.findings: list[str] = []
        """What a test found out on its way to failing, printed last by :meth:`digest`."""

    # -- settings as the tests see them -----------------------------------------------

    @property
    def settings(self) -> Settings:
        from voxwire.core.config import load_settings

        saved = dict(os.environ)
        try:
            os.environ.update(self.env)
            return load_settings(mode="distributed")
        finally:
            os.environ.clear()
            os.environ.update(saved)

    @property
    def url(self) -> str:
        return self.gateway_url("gateway")

    def gateway_url(self, name: str) -> str:
        """The URL of gateway process ``name`` (another than the first is spawned
        with its own ``http_port``)."""
        port = self.own_settings.get(name, {}).get("http_port", self.env["VOXWIRE_HTTP_PORT"])
        return f"http://127.0.0.1:{port}"

    @property
    def mqtt_url(self) -> str:
        return self.env["VOXWIRE_MQTT_URL"]

    @property
    def mqtt_port(self) -> int:
        return urlsplit(self.mqtt_url).port or 1883

    # -- processes ----------------------------------------------------------------------

    def start(self) -> DistributedPlatform:
        from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

        settings = self.settings
        kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=self.namespace)
        self.api_key = self.new_tenant_key("default")
        try:
            self.spawn("bridge")
            for i in range(self.worker_count):
                self.spawn(f"worker-{i}")
            self.spawn("gateway")
            self.wait_ready()
            if self.worker_count:
                wait_for_workers(
                    settings.servers.kafka_bootstrap, self.namespace, self.worker_count
                )
        except BaseException:
            self.stop()  # nothing left running to answer the next tests' messages
            raise
        return self

    def spawn(self, name: str, **settings: str) -> subprocess.Popen[bytes]:
        """Start process ``name`` (its role, then ``-anything``); ``settings`` are this
        process's own, over the platform's."""
        role = name.split("-")[0]
        self.own_settings[name] = settings
        env = self.env | {f"VOXWIRE_{k.upper()}": v for k, v in settings.items()}
        log = (self.log_dir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "voxwire.cli", role],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def wait_ready(self, timeout: float = 60, gateway: str = "gateway") -> None:
        """Until ``gateway`` answers; fails at once if a process exited."""
        url = self.gateway_url(gateway)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited:\n{self.log(name)}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{gateway} not ready:\n{self.log(gateway)}")

    def log(self, name: str, tail: int | None = 4000) -> str:
        """The process's log (its last ``tail`` characters; None: all of it)."""
        text = (self.log_dir / f"{name}.log").read_text(errors="replace")
        return text if tail is None else text[-tail:]

    def digest(self, lines: int = 12) -> str:
        """What each process said last, and its last warnings and errors: printed
        when a test fails, so a failure away from this machine can be read."""
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            exited = self.processes.get(path.stem)
            status = "not running" if exited is None or exited.poll() is not None else "running"
            notable = [
                line
                for line in text
                if (" WARNING " in line or " ERROR " in line or "Traceback" in line)
                and "librdkafka: FAIL" not in line
            ]
            parts.append(f"== {path.stem} ({status}, {len(text)} lines)")
            parts += [line[:300] for line in notable[-lines:]]
            parts.append("-- last lines")
            parts += [line[:300] for line in text[-5:]]
        parts += self.findings
        return "\n".join(parts)

    def kill(self, name: str) -> None:
        """SIGKILL: no goodbye to Kafka or the broker."""
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def restart(self, name: str) -> None:
        settings = self.own_settings.get(name, {})
        self.stop_process(name)
        self.spawn(name, **settings)

    def stop_process(self, name: str) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)

    def stop(self) -> None:
        for name in list(self.processes):
            self.stop_process(name)
        self.drop_namespace()

    def drop_namespace(self) -> None:
        """Delete this run's Kafka topics, PostgreSQL schema and search index."""
        import httpx
        import psycopg
        from confluent_kafka.admin import AdminClient

        settings = self.settings
        admin = AdminClient({"bootstrap.servers": settings.servers.kafka_bootstrap})
        prefix = f"{self.namespace}."
        mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        for future in admin.delete_topics(mine).values() if mine else ():
            future.result(30)
        with psycopg.connect(
            settings.servers.postgres_dsn.get_secret_value(), autocommit=True
        ) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.namespace}" CASCADE')  # type: ignore[arg-type]
        index = f"voxwire-transcripts-{self.namespace}-*"
        httpx.delete(f"{settings.servers.opensearch_url}/{index}", timeout=30)

    def new_tenant_key(self, name: str) -> str:
        from voxwire.platform import build

        async def create() -> str:
            async with build(self.settings) as platform:
                _, key = await platform.create_key(name, "test")
            return key.plaintext

        return asyncio.run(create())

    def new_device_key(self, device: str) -> str:
        """A device key of the default tenant (``voxwire keys create --device``)."""
        from voxwire.platform import build

        async def create() -> str:
            async with build(self.settings) as platform:
                _, key = await platform.create_key("default", device, "device")
            return key.plaintext

        return asyncio.run(create())

    def revoke_key(self, key_id: str) -> None:
        from voxwire.platform import build

        async def revoke() -> None:
            async with build(self.settings) as platform:
                assert await platform.revoke_key(key_id)

        asyncio.run(revoke())


def wait_for_workers(bootstrap: str, namespace: str, count: int = 1, timeout: float = 120) -> None:
    """Until ``count`` workers of the default model are members of its job and
    stream groups, each with partitions: the gateway refuses sessions of a model
    whose groups do not exist yet (``no_worker``), and a test that stops one of
    several workers needs each to have its share of the jobs."""
    from confluent_kafka import ConsumerGroupState, KafkaException
    from confluent_kafka.admin import AdminClient

    from voxwire.wire.pools import STREAM_GROUP, WORKER_GROUP

    admin = AdminClient({"bootstrap.servers": bootstrap})
    groups = [f"{namespace}.{group}" for group in (WORKER_GROUP, STREAM_GROUP)]
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        futures = admin.describe_consumer_groups(groups, request_timeout=5)
        try:
            found = {group: future.result(timeout=10) for group, future in futures.items()}
        except (KafkaException, concurrent.futures.TimeoutError):  # e.g. NOT_COORDINATOR
            time.sleep(0.5)
            continue
        if all(
            g.state == ConsumerGroupState.STABLE
            and len(g.members) >= count
            and all(m.assignment.topic_partitions for m in g.members)
            for g in found.values()
        ):
            return
        time.sleep(0.2)
    states = {name: (g.state, len(g.members)) for name, g in found.items()}
    raise AssertionError(f"{count} worker(s) did not join {groups} in {timeout} s: {states}")
