"""The ``device`` and ``compute_type`` settings: parsing, ``auto`` falling back to
the CPU on a machine without CUDA, a clear error at start-up when CUDA is asked
for and cannot be had, and the chosen device in /healthz."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers import PlatformThread
from voxwire.core.config import Settings, load_settings
from voxwire.core.errors import ConfigError, EngineError
from voxwire.platform import build
from voxwire.workers.engines import create_engine
from voxwire.workers.engines.device import (
    Accelerators,
    Device,
    choose_device,
    instances_for,
    parse_device,
)
from voxwire.workers.engines.ggml_devices import built_with_cuda, system_info

pytestmark = pytest.mark.timeout(300)

H200 = Accelerators("whisper.cpp", cuda_build=True, gpus=("NVIDIA H200",), fix="build it")
NO_CUDA = Accelerators("whisper.cpp", cuda_build=False, fix="build it with CUDA")
NO_GPU = Accelerators("faster-whisper", cuda_build=True, fix="get the libraries")
BAD_LIBS = Accelerators(
    "faster-whisper", True, ("CUDA device 0",), "needs libcublas.so.12", "get the libraries"
)


@pytest.mark.parametrize(
    ("text", "device"),
    [
        ("auto", None),
        ("cpu", Device("cpu")),
        ("cuda", Device("cuda", 0)),
        ("CUDA:3", Device("cuda", 3)),
    ],
)
def test_device_names(text: str, device: Device | None) -> None:
    assert parse_device(text) == device


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "cpu:1", "metal", ""])
def test_an_unknown_device_is_refused_with_the_names_it_takes(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="unknown device"):
        parse_device(value)
    monkeypatch.setenv("VOXWIRE_DEVICE", value or " ")
    with pytest.raises(ConfigError, match=r"device: .*auto, cpu, cuda or cuda:N") as caught:
        load_settings(tmp_path / "none.toml")
    assert caught.value.hint is not None and "VOXWIRE_DEVICE" in caught.value.hint


def test_device_and_compute_type_are_engine_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (Settings().engine.device, Settings().engine.compute_type) == ("auto", "default")
    monkeypatch.setenv("VOXWIRE_DEVICE", "cuda:1")
    monkeypatch.setenv("VOXWIRE_COMPUTE_TYPE", "int8_float16")
    settings = load_settings(tmp_path / "none.toml")
    assert (settings.engine.device, settings.engine.compute_type) == ("cuda:1", "int8_float16")
    (tmp_path / "server.toml").write_text('[engine]\ndevice = "cpu"\ncompute_type = "q5_0"\n')
    monkeypatch.delenv("VOXWIRE_DEVICE")
    monkeypatch.delenv("VOXWIRE_COMPUTE_TYPE")
    settings = load_settings(tmp_path / "server.toml")
    assert (settings.engine.device, settings.engine.compute_type) == ("cpu", "q5_0")
    with pytest.raises(ConfigError, match=r"compute_type: .*'fp16' is not one of"):
        load_settings(tmp_path / "none.toml", compute_type="fp16")


def test_auto_takes_the_gpu_when_the_engine_can_use_it_else_the_cpu() -> None:
    on_gpu = choose_device("auto", H200)
    assert (on_gpu.device, str(on_gpu)) == (Device("cuda", 0), "cuda:0 (NVIDIA H200)")
    for found, why in [
        (NO_CUDA, "built without CUDA"),
        (NO_GPU, "sees no CUDA device"),
        (BAD_LIBS, "libcublas.so.12"),
    ]:
        choice = choose_device("auto", found)
        assert choice.device == Device("cpu") and str(choice) == "cpu"
        assert why in choice.reason
    assert choose_device("cpu", H200).device == Device("cpu")


def test_cuda_that_cannot_be_had_is_a_clear_error() -> None:
    assert str(choose_device("cuda", H200)) == "cuda:0 (NVIDIA H200)"
    for found, why in [
        (NO_CUDA, "built without CUDA"),
        (NO_GPU, "no CUDA device"),
        (BAD_LIBS, "libcublas.so.12"),
    ]:
        with pytest.raises(EngineError, match=why) as caught:
            choose_device("cuda", found)
        assert caught.value.hint is not None
        assert found.fix in caught.value.hint and "device=cpu" in caught.value.hint
    with pytest.raises(EngineError, match="sees 1 CUDA device") as caught:
        choose_device("cuda:1", H200)
    assert caught.value.hint is not None and "cuda:0" in caught.value.hint


def test_engine_instances_are_sized_by_the_free_memory() -> None:
    gib = 1 << 30
    assert instances_for(140 * gib, 1 * gib) == 64  # capped
    assert instances_for(10 * gib, 1 * gib) == 9  # 10 % kept spare
    assert instances_for(gib // 2, gib) == 1  # always one


def test_whisper_cpp_here_is_a_cpu_build(model_path: Path) -> None:
    assert not built_with_cuda(system_info())
    assert built_with_cuda("WHISPER : COREML = 0 | CUDA : ARCHS = 900 | USE_GRAPHS = 1 |")
    engine = create_engine("whispercpp", model_path)
    try:
        choice = engine.device  # type: ignore[attr-defined]
        assert str(choice) == "cpu" and "built without CUDA" in choice.reason
    finally:
        engine.close()
    with pytest.raises(EngineError, match="built without CUDA") as caught:
        create_engine("whispercpp", model_path, device="cuda")
    assert caught.value.hint is not None and "scripts/build-cuda.sh" in caught.value.hint
    with pytest.raises(EngineError, match="weight type of its model file") as caught:
        create_engine("whispercpp", model_path, compute_type="q5_0")
    assert caught.value.hint is not None and "tiny.en-q5_0" in caught.value.hint


def test_faster_whisper_here_sees_no_gpu() -> None:
    engine = create_engine("faster-whisper", "tiny.en", device="auto")
    try:
        choice = engine.device  # type: ignore[attr-defined]
        assert str(choice) == "cpu" and "no CUDA device" in choice.reason
        assert engine.compute_type == "int8"  # type: ignore[attr-defined]
    finally:
        engine.close()
    with pytest.raises(EngineError, match="sees no CUDA device") as caught:
        create_engine("faster-whisper", "tiny.en", device="cuda:0")
    assert caught.value.hint is not None and "device=cpu" in caught.value.hint
    with pytest.raises(EngineError, match="cannot compute in float16 on cpu") as caught:
        create_engine("faster-whisper", "tiny.en", compute_type="float16")
    assert caught.value.hint is not None and "int8" in caught.value.hint


def test_healthz_says_where_the_engines_run(tmp_path: Path, model_path: Path) -> None:
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path, engine="whispercpp", workers=1
    )
    running = PlatformThread(settings, model_path).start()
    try:
        health = httpx.get(f"{running.url}/healthz").json()
        assert (health["status"], health["device"]) == ("ok", "cpu")
    finally:
        running.stop()


async def test_cuda_asked_for_without_it_stops_the_start(tmp_path: Path, model_path: Path) -> None:
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path, engine="whispercpp", device="cuda"
    )
    async with build(settings, model_path=model_path) as platform:
        with pytest.raises(EngineError, match=r"device=cuda but whisper\.cpp was built without"):
            await platform.start()
