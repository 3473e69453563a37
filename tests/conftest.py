"""Fixtures shared by the suite: an isolated cache/config, the real model, the platform."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation.distributed import DistributedPlatform
from tests.helpers import PlatformThread
from tests.models.conftest import Converted, convert_all
from voxwire.core.config import Settings


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run ``any_engine`` suites on the default engine only (see ``platform``)."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        second_engine = callspec is not None and callspec.params.get("platform") == (
            "embedded-whispercpp"
        )
        (dropped if second_engine and item.get_closest_marker("any_engine") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Never touch the user's config; share one model cache per run."""
    config_dir = tmp_path_factory.mktemp("config")
    saved = {k: os.environ.get(k) for k in ("VOXWIRE_CONFIG_DIR", "VOXWIRE_CONFIG")}
    os.environ["VOXWIRE_CONFIG_DIR"] = str(config_dir)
    os.environ["VOXWIRE_CONFIG"] = str(config_dir / "server.toml")
    for name in ("VOXWIRE_URL", "VOXWIRE_API_KEY", "VOXWIRE_MQTT_URL"):
        os.environ.pop(name, None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def model_path() -> Path:
    from voxwire.models import registry

    return registry.resolve("tiny.en")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty model cache for this test session."""
    return tmp_path_factory.mktemp("voxwire-cache")


@pytest.fixture(scope="session")
def converted(model_cache: Path) -> dict[str, Converted]:
    """The tiny.en models, converted fresh into ``model_cache``, with the time it
    took: once per run, for the model tests and the engine tests."""
    return convert_all(model_cache)


@pytest.fixture(scope="session", params=["embedded", "embedded-whispercpp", "distributed"])
def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_path: Path
) -> Iterator[PlatformThread | DistributedPlatform]:
    """The whole platform, in each mode and with each engine: the end-to-end
    suite runs against all three (the distributed mode runs the same worker
    code as the embedded one, so it runs with the default engine only:
    faster-whisper). Suites marked ``any_engine`` check what no engine changes
    (access, bad input, stores, exports, the OpenAI, Deepgram and telephony
    protocols, channels): they skip the second engine, whose own results the
    streaming, file, telephone-audio and diarization suites check."""
    if request.param == "distributed":
        distributed = DistributedPlatform(
            tmp_path_factory.mktemp("distributed"), max_audio_s="90", max_upload_mb="8"
        ).start()
        yield distributed
        distributed.stop()
        return
    whispercpp = request.param == "embedded-whispercpp"
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=tmp_path_factory.mktemp("data"),
        max_audio_s=90,
        max_upload_mb=8,
        engine="whispercpp" if whispercpp else "faster-whisper",
    )
    running = PlatformThread(settings, model_path if whispercpp else None).start()
    yield running
    running.stop()
