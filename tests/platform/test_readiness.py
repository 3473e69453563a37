"""Readiness in embedded mode: ``/readyz`` names every dependency of the process and
answers 200 only when each of them does; ``/healthz`` stays a plain liveness answer."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import PlatformThread
from voxwire.bus.kafka import KafkaBus
from voxwire.core.config import Settings
from voxwire.core.readiness import HEALTH_PATH, READY_PATH, Readiness


@pytest.fixture(scope="module")
def embedded(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path
) -> Iterator[PlatformThread]:
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=tmp_path_factory.mktemp("ready"),
        engine="whispercpp",
        workers=1,
    )
    running = PlatformThread(settings, model_path).start()
    yield running
    running.stop()


def test_the_embedded_platform_is_ready_with_a_reason_per_dependency(
    embedded: PlatformThread,
) -> None:
    answer = httpx.get(f"{embedded.url}{READY_PATH}", timeout=10)
    body = answer.json()
    assert (answer.status_code, body["status"]) == (200, "ready"), body
    checks = body["checks"]
    assert set(checks) == {"sqlite", "sqlite-fts", "mqtt", "engine", "roles"}
    assert all(check["ok"] and check["reason"] for check in checks.values())


def test_healthz_is_liveness_without_a_key(embedded: PlatformThread) -> None:
    answer = httpx.get(f"{embedded.url}{HEALTH_PATH}", timeout=10)
    assert answer.status_code == 200 and answer.json()["status"] == "ok"


def test_a_dependency_that_accepts_but_never_answers_is_not_ready_in_time() -> None:
    """A Kafka "broker" that accepts connections and says nothing: the check gives up
    within its timeout with a reason, and the event loop is never blocked."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]

        async def probe() -> tuple[bool, str, int]:
            bus = KafkaBus(f"127.0.0.1:{port}")
            readiness = Readiness(timeout_s=1.0)
            readiness.add("kafka", bus.ping)
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            try:
                report = await readiness.report()
            finally:
                ticker.cancel()
                await bus.close()
            return report.checks["kafka"].ok, report.checks["kafka"].reason, ticks

        ok, reason, ticks = asyncio.run(probe())
    assert not ok
    assert "Kafka" in reason or "no answer" in reason
    assert ticks > 0  # the loop kept running while Kafka did not answer
