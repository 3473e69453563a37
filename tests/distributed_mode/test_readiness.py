"""Readiness in distributed mode: each process (gateway, worker, bridge) answers
``/readyz`` with a reason per dependency, 200 once every one answers; a process
pointed at a server that is not there is alive (``/healthz``) and not ready, and
``/readyz`` names what it cannot reach."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from evaluation.distributed import DistributedPlatform
from evaluation.ports import free_port
from tests.distributed import readyz
from voxwire.core.readiness import HEALTH_PATH


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    return free_port()


class Cluster:
    """Bridge and worker with their probes on ports of their own, and a gateway."""

    def __init__(self, platform: DistributedPlatform) -> None:
        from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

        self.platform = platform
        self.ports = {"bridge": free_port(), "worker-0": free_port()}
        settings = platform.settings
        kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=platform.namespace)
        for name, port in self.ports.items():
            platform.spawn(name, metrics_port=str(port))
        platform.spawn("gateway")
        platform.wait_ready()

    def url(self, name: str) -> str:
        return self.platform.url if name == "gateway" else probe_url(self.ports[name])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    platform = DistributedPlatform(tmp_path_factory.mktemp("readiness"), workers=0)
    try:
        yield Cluster(platform)
    finally:
        platform.stop()


def probe_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def test_every_process_is_ready_with_a_reason_per_dependency(cluster: Cluster) -> None:
    expected = {
        # the gateway and the bridge (deletes over MQTT) clear a live stream's checkpoint
        "gateway": {"kafka", "postgres", "opensearch", "mqtt", "redis", "roles"},
        "bridge": {"kafka", "postgres", "opensearch", "mqtt", "redis", "roles"},
        "worker-0": {"kafka", "redis", "engine", "roles"},
    }
    for name, names in expected.items():
        url = cluster.url(name)
        body = readyz(url, until=200)
        assert body["status"] == "ready", (name, body)
        assert set(body["checks"]) == names, (name, body, cluster.platform.digest())
        assert all(check["ok"] and check["reason"] for check in body["checks"].values())
        assert httpx.get(f"{url}{HEALTH_PATH}", timeout=10).json()["status"] == "ok"


def test_the_probes_port_serves_the_process_metrics(cluster: Cluster) -> None:
    text = httpx.get(f"{cluster.url('worker-0')}/metrics", timeout=10).text
    assert "voxwire_live_streams" in text


def test_a_gateway_without_kafka_is_alive_and_not_ready_naming_kafka(
    cluster: Cluster,
) -> None:
    port = free_port()
    cluster.platform.spawn(
        "gateway-nokafka", http_port=str(port), kafka_bootstrap=f"127.0.0.1:{closed_port()}"
    )
    try:
        deadline = time.monotonic() + 120
        body = readyz(probe_url(port), until=503)
        while not body["checks"]["roles"]["ok"] and time.monotonic() < deadline:
            body = readyz(probe_url(port), until=503)  # still starting its roles
        assert httpx.get(f"{probe_url(port)}{HEALTH_PATH}", timeout=10).status_code == 200
    finally:
        cluster.platform.stop_process("gateway-nokafka")
    assert body["status"] == "not ready"
    failing = {name for name, check in body["checks"].items() if not check["ok"]}
    assert failing == {"kafka"}, body
    assert (
        "Kafka" in body["checks"]["kafka"]["reason"]
        or "no answer" in body["checks"]["kafka"]["reason"]
    )


def test_a_worker_without_redis_is_not_ready_naming_redis(cluster: Cluster) -> None:
    port = free_port()
    cluster.platform.spawn(
        "worker-noredis", metrics_port=str(port), redis_url=f"redis://127.0.0.1:{closed_port()}/0"
    )
    try:
        deadline = time.monotonic() + 120
        body = readyz(probe_url(port), until=503)
        # the engine's check appears once the bus and Redis were tried, ok once loaded
        while not body["checks"].get("engine", {}).get("ok") and time.monotonic() < deadline:
            body = readyz(probe_url(port), until=503)
    finally:
        cluster.platform.stop_process("worker-noredis")
    failing = {name for name, check in body["checks"].items() if not check["ok"]}
    assert failing == {"redis"}, body
    assert "Redis" in body["checks"]["redis"]["reason"], body
