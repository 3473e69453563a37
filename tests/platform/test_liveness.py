"""Liveness: ``/healthz`` turns 503, with what is stuck, when an engine call runs
past its bound, the event loop is blocked, or a Kafka consumer thread stops
going round; a slow call within its bound and an idle process stay healthy."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.helpers import PlatformThread
from voxwire.core.config import Settings
from voxwire.core.liveness import Calls, Liveness, LoopWatch
from voxwire.core.readiness import HEALTH_PATH, READY_PATH, Readiness
from voxwire.platform.probes import serve_probes
from voxwire.workers import watched
from voxwire.workers.engine import EngineOptions, Segment
from voxwire.workers.watched import WatchedEngine

pytestmark = pytest.mark.timeout(120)


class SlowEngine:
    """Takes ``seconds`` per call, or until ``release`` is set when it hangs."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.release = threading.Event()

    def transcribe(self, audio, options, on_segment=None, abort=None) -> list[Segment]:  # type: ignore[no-untyped-def]
        self.release.wait(self.seconds)
        return [Segment(0, 1000, "done")]

    def detect_language(self, audio, options) -> tuple[str, float]:  # type: ignore[no-untyped-def]
        self.release.wait(self.seconds)
        return "en", 1.0

    def close(self) -> None:
        self.release.set()


def test_an_engine_call_past_its_bound_is_stuck_and_a_slow_one_within_it_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watched, "FLOOR_S", 1.0)
    monkeypatch.setattr(watched, "PER_AUDIO_S", 0.1)  # 10 s of audio: 2 s
    calls = Calls()
    liveness = Liveness()
    liveness.add("engines", calls)
    ten_seconds = np.zeros(160_000, dtype=np.float32)

    slow = WatchedEngine(SlowEngine(0.8), calls)  # progressing: done within its bound
    seen: list[str] = []
    worker = threading.Thread(target=slow.transcribe, args=(ten_seconds, EngineOptions()))
    worker.start()
    while worker.is_alive():
        seen += liveness.report().problems.values()
        time.sleep(0.05)
    assert seen == [] and liveness.report().alive

    hung = SlowEngine(60)
    engine = WatchedEngine(hung, calls)
    worker = threading.Thread(target=engine.transcribe, args=(ten_seconds, EngineOptions()))
    worker.start()
    time.sleep(2.6)
    report = liveness.report()
    assert report.http_status == 503 and report.status == "stuck"
    why = report.problems["engines"]
    assert why.startswith("a slow call on 10.0 s of audio has run "), why
    assert why.endswith(" s, past its bound of 2 s"), why
    hung.release.set()
    worker.join()
    assert liveness.report().alive  # back once the call returns
    # what the engine can do besides transcribe it still can, watched too
    assert engine.detect_language(ten_seconds, EngineOptions()) == ("en", 1.0)
    assert not hasattr(engine, "transcribe_batch")


def test_a_blocked_event_loop_turns_the_probe_server_to_503_while_it_lasts() -> None:
    """The probe server answers from a thread of its own: while the process's loop
    is blocked, /healthz says so and /readyz gives up on the checks."""

    async def scenario() -> tuple[dict[str, httpx.Response], httpx.Response]:
        liveness, readiness = Liveness(), Readiness(timeout_s=0.5)
        watch = LoopWatch(bound_s=1.0, tick_s=0.1)
        liveness.add("event loop", watch)
        beating = asyncio.create_task(watch.run())
        server, task = await serve_probes(readiness, liveness, "worker", "127.0.0.1", 0)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        await asyncio.sleep(0.3)
        during: dict[str, httpx.Response] = {}

        def ask_while_blocked() -> None:
            time.sleep(2.0)
            for path in (HEALTH_PATH, READY_PATH):
                during[path] = httpx.get(url + path, timeout=10)

        asker = threading.Thread(target=ask_while_blocked)
        asker.start()
        time.sleep(5.0)  # the loop is blocked: no beat, no readiness check runs
        await asyncio.to_thread(asker.join)
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient() as client:
            after = await client.get(url + HEALTH_PATH, timeout=10)
        server.should_exit = True
        await task
        beating.cancel()
        return during, after

    during, after = asyncio.run(scenario())
    health, ready = during[HEALTH_PATH], during[READY_PATH]
    assert health.status_code == 503, health.text
    assert "the event loop has not run for" in health.json()["problems"]["event loop"]
    assert ready.status_code == 503 and "did not run the checks" in ready.text
    assert after.status_code == 200 and after.json()["status"] == "ok"


@pytest.fixture(scope="module")
def embedded(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path
) -> Iterator[PlatformThread]:
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path_factory.mktemp("live"),
        engine="whispercpp", workers=1,
    )  # fmt: skip
    running = PlatformThread(settings, model_path).start()
    yield running
    running.stop()


def test_the_gateway_healthz_names_an_engine_call_past_its_bound(embedded: PlatformThread) -> None:
    """The gateway's /healthz reads the watches of the process's roles: an idle
    platform is alive, an engine call past its bound makes it 503 until it ends."""
    url = f"{embedded.url}{HEALTH_PATH}"
    assert httpx.get(url, timeout=10).json()["status"] == "ok"
    calls = embedded.platform.adapters.engine_calls
    with calls.running("a whispercpp call on 3.0 s of audio", 0.2):
        time.sleep(0.5)
        answer = httpx.get(url, timeout=10)
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "stuck" and body["models"], body
    assert body["problems"]["engines"].startswith("a whispercpp call on 3.0 s of audio has run")
    assert httpx.get(url, timeout=10).status_code == 200
