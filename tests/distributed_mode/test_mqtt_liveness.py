"""Liveness of the broker connections in distributed mode: the gateway's
``/healthz`` and the bridge's probe port stay 200 while idle and connected (the
keepalive pings are answered), turn 503 naming their MQTT watches once the
broker has been frozen (SIGSTOP: sockets open, nothing answers) for longer than
the bound of 3 keepalives, and 200 again once it runs.

It freezes the Mosquitto of ``scripts/services.sh`` (``VOXWIRE_SERVICES_DIR``
when set): serial, like the other tests that stop or freeze a server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from evaluation.distributed import DistributedPlatform
from evaluation.ports import free_port
from tests.distributed import wait_until
from tests.services import frozen, service_pid
from voxwire.core.readiness import HEALTH_PATH

pytestmark = [pytest.mark.timeout(300), pytest.mark.serial]

KEEPALIVE_S = 2
BOUND_S = 3 * KEEPALIVE_S
WATCHES = {"gateway": {"mqtt eraser", "mqtt dynsec"}, "bridge": {"mqtt relay", "mqtt ingest"}}


class Processes:
    """A gateway and a bridge (its probes on a port of their own), no worker."""

    def __init__(self, platform: DistributedPlatform) -> None:
        from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

        self.platform = platform
        self.bridge_port = free_port()
        settings = platform.settings
        kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=platform.namespace)
        platform.spawn("bridge", metrics_port=str(self.bridge_port))
        platform.spawn("gateway")
        platform.wait_ready()
        self.urls = {"gateway": platform.url, "bridge": f"http://127.0.0.1:{self.bridge_port}"}

    def health(self) -> dict[str, httpx.Response]:
        return {
            name: httpx.get(f"{url}{HEALTH_PATH}", timeout=10) for name, url in self.urls.items()
        }


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    platform = DistributedPlatform(
        tmp_path_factory.mktemp("mqtt-liveness"), workers=0, mqtt_keepalive_s=str(KEEPALIVE_S)
    )
    try:
        yield Processes(platform)
    finally:
        platform.stop()


def test_idle_connected_processes_stay_alive_past_the_bound(processes: Processes) -> None:
    start = time.monotonic()
    answers: list[tuple[str, int, str]] = []
    while time.monotonic() - start < 3 * BOUND_S:
        for name, answer in processes.health().items():
            answers.append((name, answer.status_code, answer.text))
        time.sleep(0.5)
    assert {status for _, status, _ in answers} == {200}, [a for a in answers if a[1] != 200]


def test_a_frozen_broker_turns_healthz_503_naming_the_mqtt_watches_until_it_runs(
    processes: Processes,
) -> None:
    assert {a.status_code for a in processes.health().values()} == {200}
    with frozen(service_pid("mosquitto")):

        def all_stuck() -> bool:
            answers = processes.health()
            return all(
                answer.status_code == 503 and WATCHES[name] <= set(answer.json()["problems"])
                for name, answer in answers.items()
            )

        wait_until(all_stuck, timeout=20 * BOUND_S)
        answers = processes.health()
        metrics = httpx.get(f"{processes.urls['bridge']}/metrics", timeout=10).text
    for name, answer in answers.items():
        body = answer.json()
        assert body["status"] == "stuck", body
        for watch in WATCHES[name]:
            why = body["problems"][watch]
            assert why.startswith("the MQTT connection voxwire-"), why
            assert why.endswith(f"not even a keepalive answer (bound {BOUND_S} s)"), why
    assert 'voxwire_liveness_stuck{watch="mqtt ingest"} 1.0' in metrics

    wait_until(lambda: {a.status_code for a in processes.health().values()} == {200}, timeout=120)
    metrics = httpx.get(f"{processes.urls['bridge']}/metrics", timeout=10).text
    assert 'voxwire_liveness_stuck{watch="mqtt ingest"} 0.0' in metrics
