"""What lets a Kubernetes installation run workers as separate pools: a worker that
serves only files or only streams loads only those engines, and the ``emqx`` broker
keeps nothing in sync (EMQX asks the gateway's hooks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxwire.access.control import NoAccessSync
from voxwire.core.config import Settings
from voxwire.platform import roles
from voxwire.platform.brokers import BROKERS
from voxwire.platform.roles import cgroup_cpus, file_engines, load_engines, stream_engines


@pytest.mark.parametrize("kind", ["all", "files", "streams"])
def test_a_worker_loads_the_engines_of_what_it_serves(kind: str, model_path: Path) -> None:
    settings = Settings(engine="whispercpp", workers=1, threads=1, worker_kind=kind)
    live, files = load_engines(settings, model_path)
    try:
        assert len(live) == (0 if kind == "files" else len(stream_engines(settings)))
        assert len(files) == (0 if kind == "streams" else 1)
    finally:
        for engine in live + files:
            engine.close()


@pytest.mark.parametrize(
    ("engine", "cores", "workers", "threads", "expected"),
    [
        ("faster-whisper", 2, 0, 0, [1, 1]),  # the defaults on 2 cores
        ("whispercpp", 2, 0, 0, [2]),
        ("whispercpp", 16, 0, 0, [4, 4, 4, 4]),
        ("faster-whisper", 8, 0, 2, [2, 2, 2, 2]),
        ("faster-whisper", 1, 0, 2, [2]),
        ("whispercpp", 8, 3, 1, [1, 1, 1]),
    ],
)
def test_files_run_on_as_many_engines_as_the_cores_hold_unless_told(
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    cores: int,
    workers: int,
    threads: int,
    expected: list[int],
) -> None:
    monkeypatch.setattr(roles, "cpu_cores", lambda: cores)
    assert file_engines(Settings(engine=engine, workers=workers, threads=threads)) == expected


def test_a_containers_cpu_limit_bounds_the_cores() -> None:
    """cgroup v2 ``cpu.max``: a pod limited to 1.5 CPUs has 2 to plan for."""
    assert cgroup_cpus("200000 100000\n") == 2
    assert cgroup_cpus("150000 100000") == 2
    assert cgroup_cpus("50000 100000") == 1
    assert cgroup_cpus("max 100000") is None
    assert cgroup_cpus("") is None


async def test_on_emqx_the_gateway_keeps_no_broker_rules_in_sync() -> None:
    settings = Settings(mode="distributed", broker="emqx", mqtt_url="mqtt://emqx:1883")
    assert settings.broker_urls[0] == "mqtt://emqx:1883"
    async with BROKERS["emqx"].access(settings) as access:
        assert isinstance(access, NoAccessSync)
