"""File-job throughput in distributed mode with 1 and 2 worker processes.

Uploads the evaluation files at once over HTTP and follows every session over
MQTT (Mosquitto) with the SDK until its transcript arrives; gateway, bridge
and workers are separate processes on the servers of `make services`.

    .venv/bin/python benchmarks/bench_distributed_files.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.corpus import eval_with_text
from evaluation.distributed import DistributedPlatform
from voxwire_client import AsyncClient


async def run_files(platform: DistributedPlatform, files: list[Path]) -> tuple[float, float]:
    async def one(path: Path) -> int:
        async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
            return (await client.transcribe(path)).duration_ms

    start = time.perf_counter()
    durations = await asyncio.gather(*(one(f) for f in files))
    return sum(durations) / 1000, time.perf_counter() - start


def main() -> None:
    files = [item.path for item in eval_with_text()]
    rows = []
    for workers, threads in ((1, 2), (2, 2), (2, 1)):
        with tempfile.TemporaryDirectory() as tmp:
            platform = DistributedPlatform(Path(tmp), workers=workers, threads=str(threads))
            platform.start()
            try:
                audio, wall = asyncio.run(run_files(platform, files))
            finally:
                platform.stop()
        rows.append((workers, threads, audio, wall))
    print(f"{len(files)} files, {rows[0][2]:.1f} s of audio")
    print(f"{'workers':<10}{'threads':>8}{'wall s':>10}{'audio s/s':>12}{'vs 1 worker':>13}")
    for workers, threads, audio, wall in rows:
        print(
            f"{workers:<10}{threads:>8}{wall:>10.2f}{audio / wall:>12.2f}"
            f"{rows[0][3] / wall:>12.2f}x"
        )


if __name__ == "__main__":
    main()
