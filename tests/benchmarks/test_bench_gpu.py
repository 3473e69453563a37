"""benchmarks/bench_gpu.py on this machine's CPU (``--quick``): it runs from the
clips it carries to a GPU machine, reports every phase or why it skipped one,
says there is no GPU here instead of failing, and needs neither PyAV nor the
platform's other dependencies (a bare CUDA image has numpy and little else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_gpu.py"
PATH = os.pathsep.join(str(ROOT / p) for p in ("src", "workers"))

pytestmark = pytest.mark.timeout(600)

# What a bare CUDA image lacks: importing any of these fails, as it would there.
WITHOUT = "import sys; [sys.modules.__setitem__(m, None) for m in ('av', 'pydantic', 'jiwer')]; "


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = WITHOUT + f"sys.argv = {[str(BENCH), *args]!r}; import runpy; "
    code += f"runpy.run_path({str(BENCH)!r}, run_name='__main__')"
    env = {**os.environ, "PYTHONPATH": PATH, "GGML_NO_BACKTRACE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=540
    )


def test_quick_run_on_the_cpu_from_carried_clips(tmp_path: Path, model_path: Path) -> None:
    clips = tmp_path / "clips.npz"
    written = subprocess.run(
        [sys.executable, str(BENCH), "--write-clips", str(clips)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": PATH},
        timeout=120,
    )
    assert written.returncode == 0, written.stderr
    out = tmp_path / "bench.json"
    args = ["--quick", "--models", str(model_path), "--clips", str(clips), "--json", str(out)]
    done = _run(*args, "--budget-s", "240")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["machine"]["gpus"] == [] and "CPU" in report["machine"]["whispercpp"]
    cuda, cpu = report["results"]
    assert "no GPU here" in cuda["error"]
    assert cpu["engine_device"] == "cpu" and cpu["instances"] >= 1
    for name, seconds in (("short", 3.0), ("long", 29.7)):
        clip = cpu["latency"][name]
        assert clip["audio_s"] == pytest.approx(seconds, abs=0.05)
        assert clip["p50_ms"] > 0 and clip["wer"] <= 0.25
    for row in cpu["files"]:
        assert row.get("audio_s_per_s", 0) > 0 or row["skipped"] == "time budget"
    first = cpu["streams"][0]
    assert first["streams"] == 1 and first.get("expected_finals", 2) == 2
    assert "held" in first or first["skipped"] == "time budget"
    assert f"{model_path.name} on cpu" in done.stdout and "clip" in done.stdout
