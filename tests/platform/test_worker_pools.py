"""What lets a Kubernetes installation run workers as separate pools: a worker that
serves only files or only streams loads only those engines, and the ``emqx`` broker
keeps nothing in sync (EMQX asks the gateway's hooks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxwire.access.control import NoAccessSync
from voxwire.core.config import Settings
from voxwire.platform.brokers import BROKERS
from voxwire.platform.roles import load_engines, stream_engines


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


async def test_on_emqx_the_gateway_keeps_no_broker_rules_in_sync() -> None:
    settings = Settings(mode="distributed", broker="emqx", mqtt_url="mqtt://emqx:1883")
    assert settings.broker_urls[0] == "mqtt://emqx:1883"
    async with BROKERS["emqx"].access(settings) as access:
        assert isinstance(access, NoAccessSync)
