"""``voxwire devices`` as an operator runs it (the GPU image's smoke runs it too): the
device each engine would choose here, CUDA refused with what to do on a machine
without it, and faster-whisper's CUDA libraries found where NVIDIA's wheel puts
them (a real shared library stands in for cuBLAS: loading does not need a GPU)."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(400)

SYSTEM_CUBLAS = ctypes.util.find_library("cublas")
LIBRARY_FOLDERS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64")


def _voxwire(
    tmp_path: Path, *args: str, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VOXWIRE_")},
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "voxwire.cli", "devices", *args],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        check=False,
    )


def _no_cuda_here() -> bool:
    import ctranslate2  # type: ignore[import-untyped]

    return int(ctranslate2.get_cuda_device_count()) == 0


def _stand_in_wheel(tmp_path: Path) -> Path:
    """A folder laid out as nvidia-cublas-cu12 installs, holding a real shared library
    under cuBLAS's names."""
    found = [Path(d) / "libz.so.1" for d in LIBRARY_FOLDERS if (Path(d) / "libz.so.1").is_file()]
    if not found:
        pytest.skip("no libz.so.1 to stand in for cuBLAS")
    lib = tmp_path / "site" / "nvidia" / "cublas" / "lib"
    lib.mkdir(parents=True)
    for name in ("libcublas.so.12", "libcublasLt.so.12"):
        shutil.copy(found[0], lib / name)
    return tmp_path / "site"


def test_each_engine_reports_the_device_it_would_run_on(tmp_path: Path) -> None:
    done = _voxwire(tmp_path, "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert "faster-whisper: cpu (device=cpu)" in done.stdout
    assert "whispercpp: cpu (device=cpu)" in done.stdout


@pytest.mark.skipif(SYSTEM_CUBLAS is not None, reason="this machine has CUDA's cuBLAS")
def test_cuda_without_a_gpu_or_cublas_is_refused_with_what_to_do(tmp_path: Path) -> None:
    if not _no_cuda_here():
        pytest.skip("this machine has a CUDA device")
    done = _voxwire(tmp_path, "--device", "cuda")
    assert done.returncode == 1
    assert "faster-whisper: cannot run on cuda" in done.stdout
    assert "sees no CUDA device" in done.stderr
    assert "libcublas.so.12: missing" in done.stdout
    missing = _voxwire(tmp_path, "--need-cuda-libraries")
    assert missing.returncode == 1
    assert "faster-whisper: cpu (auto: faster-whisper sees no CUDA device" in missing.stdout
    assert "missing libcublas.so.12, libcublasLt.so.12" in missing.stderr
    assert "voxwire[gpu]" in missing.stderr


@pytest.mark.skipif(SYSTEM_CUBLAS is not None, reason="this machine has CUDA's cuBLAS")
def test_cublas_is_found_in_nvidias_wheel_without_a_search_path(tmp_path: Path) -> None:
    site = _stand_in_wheel(tmp_path)
    done = _voxwire(tmp_path, "--need-cuda-libraries", pythonpath=site)
    assert done.returncode == 0, done.stderr
    lib = site / "nvidia" / "cublas" / "lib"
    assert f"libcublas.so.12: {lib / 'libcublas.so.12'}" in done.stdout
    assert f"libcublasLt.so.12: {lib / 'libcublasLt.so.12'}" in done.stdout
