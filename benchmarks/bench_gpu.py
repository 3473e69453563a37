"""GPU against CPU: clip latency, file throughput and live streams, per model and device.

For each model (a whisper.cpp ggml file, or a CTranslate2 folder for
faster-whisper) and each device (``cuda`` then ``cpu``: the same engine build,
on the card and on this machine's cores), it measures

- clip latency: one 3 s and one 30 s clip, one at a time on one engine
  instance, after a warm-up run: p50/p99 in ms;
- files: 30 s clips transcribed by 1..64 concurrent jobs (at most one per
  engine instance) for 8 s a level: audio seconds per wall second;
- live streams: 16..256 streams played in real time (eval utterances, 1 s of
  silence after each, starts staggered), driven in-process the way the stream
  worker schedules them: a final (the utterance, 600 ms of silence after its
  end, as the endpointer waits) goes before any partial (the utterance so far,
  each second while it is spoken; a partial still queued when its utterance is
  final is dropped), on a pool of engine instances. Final latency p50/p95 is
  from the end of the speech to the final's text, as in bench_streams.py;
  a level is held when every final arrived and p95 <= 1.5 s. The sweep stops
  at the first level that is not held;
- GPU memory (per engine instance and at most) and utilisation (pynvml or
  nvidia-smi, sampled every 0.2 s), and WER on the clips as a sanity check.

GPU engine instances are sized by the card's free memory (at most 64); CPU
ones share the cores (one per 4). ``--quick`` makes every phase small (one
run, 3 s files, 1-2 streams of 2 utterances) to check the script on a CPU.
Every phase keeps to a time budget (``--budget-s``, three fifths to the GPU) and
says what it skipped. Results: a table, and JSON with ``--json``.

    python benchmarks/bench_gpu.py --models .gpu/models/ggml-tiny.en-q5_0.bin \
        [--devices cuda,cpu] [--budget-s 420] [--json out.json] [--quick]
    python benchmarks/bench_gpu.py --write-clips .gpu/clips.npz   (from shared/eval)

It needs numpy and the engine only (not the platform's other dependencies), so
it runs on a bare CUDA image with ``PYTHONPATH=src:workers``; the clips come
from ``--clips`` (made by ``--write-clips``) or from shared/eval.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxwire.core.errors import VoxwireError
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.engines.device import instances_for

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
SHORT = ["pocketsphinx_librivox_0880"]  # 3.0 s
LONG = ["mfa_acoustic_corpus", "pocketsphinx_librivox_0880"]  # 29.7 s
UTTERANCES = ["lhotse_lj_LJ002-0020", "pocketsphinx_librivox_0880", "mfa_thoughts"]
UTTERANCES += ["leopard_ls_1272-128104-0000"]
RATE = 16_000
MIN_SILENCE_S = 0.6  # the endpointer's wait before a final
PARTIAL_EVERY_S = 1.0
TARGET_P95_S = 1.5
MAX_INSTANCES = 64


@dataclass
class Clips:
    short: np.ndarray
    long: np.ndarray
    utterances: list[np.ndarray]
    refs: dict[str, str]

    @property
    def file(self) -> np.ndarray:
        """What a file job transcribes: the 30 s clip (the 3 s one with ``--quick``)."""
        return self.short if self.quick else self.long

    quick = False

    @staticmethod
    def from_eval() -> Clips:
        from voxwire.audio.decoding import decode

        rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
        by_id = {r["id"]: r for r in rows}

        def audio(ids: list[str]) -> np.ndarray:
            parts = [decode((EVAL / by_id[i]["audio"]).read_bytes()).samples for i in ids]
            return np.concatenate(parts)

        def text(ids: list[str]) -> str:
            return " ".join(by_id[i]["text"] for i in ids)

        return Clips(
            audio(SHORT),
            audio(LONG),
            [audio([u]) for u in UTTERANCES],
            {"short": text(SHORT), "long": text(LONG)},
        )

    def save(self, path: Path) -> None:
        pcm = {f"utterance{i}": _pcm(u) for i, u in enumerate(self.utterances)}
        refs = np.array(json.dumps(self.refs))
        np.savez_compressed(path, short=_pcm(self.short), long=_pcm(self.long), refs=refs, **pcm)

    @staticmethod
    def load(path: Path) -> Clips:
        data = np.load(path)
        n = sum(1 for k in data.files if k.startswith("utterance"))
        return Clips(
            _float(data["short"]),
            _float(data["long"]),
            [_float(data[f"utterance{i}"]) for i in range(n)],
            json.loads(str(data["refs"])),
        )


def _pcm(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1, 1) * 32767).astype(np.int16)


def _float(pcm: np.ndarray) -> np.ndarray:
    return (pcm.astype(np.float32) / 32767).astype(np.float32)


def wer(ref: str, hyp: str) -> float:
    """Word error rate after lower-casing and dropping punctuation."""
    r, h = (re.sub(r"[^a-z0-9' ]+", " ", s.lower()).split() for s in (ref, hyp))
    row = list(range(len(h) + 1))
    for i, word in enumerate(r, 1):
        prev, row[0] = row[0], i
        for j, other in enumerate(h, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (word != other))
    return row[-1] / max(1, len(r))


def pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 4) if values else None


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


class GpuMonitor:
    """Utilisation and memory of one GPU, sampled in a thread (pynvml, else nvidia-smi)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.samples: list[tuple[float, float]] = []  # (util %, used MiB)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read = self._reader()

    def _reader(self) -> Any:
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)

            def nvml() -> tuple[float, float]:
                util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
                return float(util), pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20

            return nvml
        except Exception:
            pass

        def smi() -> tuple[float, float]:
            out = subprocess.run(
                [
                    "nvidia-smi",
                    f"--id={self.index}",
                    "--format=csv,noheader,nounits",
                    "--query-gpu=utilization.gpu,memory.used",
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=5,
            ).stdout
            util, used = out.strip().split(",")
            return float(util), float(used)

        try:
            smi()
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        return smi

    @property
    def available(self) -> bool:
        return self._read is not None

    def used_mib(self) -> float | None:
        return self._read()[1] if self._read else None

    def __enter__(self) -> GpuMonitor:
        self.samples = []
        self._stop.clear()
        if self._read:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.samples.append(self._read())

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def summary(self) -> dict[str, float | None]:
        utils = [u for u, _ in self.samples]
        return {
            "gpu_util_mean": round(float(np.mean(utils)), 1) if utils else None,
            "gpu_util_max": max(utils, default=None),
            "gpu_mem_max_mib": max((m for _, m in self.samples), default=None),
        }


@dataclass
class Pool:
    """Engine instances of one model on one device."""

    engines: list[Engine]
    threads: int
    """CPU threads of each call when every instance is busy."""
    device: str
    mib_per_instance: float | None = None

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    def options(self, threads: int | None = None) -> EngineOptions:
        return EngineOptions(language="en", threads=threads or self.threads)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


def load_pool(model: Path, device: str, monitor: GpuMonitor | None, most: int) -> Pool:
    """GPU: as many instances as the card's free memory holds (at most ``most``),
    2 CPU threads each; CPU: one instance per 4 cores, sharing them."""
    kind = "faster-whisper" if model.is_dir() else "whispercpp"
    cores = os.cpu_count() or 1

    def new() -> Engine:
        kwargs = {"threads": cores} if kind == "faster-whisper" and device == "cpu" else {}
        return create_engine(kind, model, device=device, **kwargs)

    first = new()
    choice = getattr(first, "device", None)
    if device != "cpu" and not (choice and choice.device.is_gpu):
        first.close()
        raise VoxwireError(f"{kind} did not take {device}: {choice}")
    if device == "cpu" or monitor is None:
        count = max(1, min(most, cores // 4))
        engines = [first] + [new() for _ in range(count - 1)]
        return Pool(engines, max(1, cores // count), str(choice or "cpu"))
    before = monitor.used_mib()
    second = new()
    after = monitor.used_mib()
    per = max(1.0, (after or 0) - (before or 0))
    free = _free_mib(monitor)
    count = min(most, instances_for(int(free * 2**20), int(per * 2**20), most=most) + 2)
    engines = [first, second] + [new() for _ in range(count - 2)]
    return Pool(engines, 2, str(choice), round(per, 1))


def _free_mib(monitor: GpuMonitor) -> float:
    out = subprocess.run(
        [
            "nvidia-smi",
            f"--id={monitor.index}",
            "--format=csv,noheader,nounits",
            "--query-gpu=memory.free",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return float(out) if out else 8192.0


def clip_latency(pool: Pool, clips: Clips, reps: int, budget: Budget) -> dict[str, Any]:
    engine, out = pool.engines[0], {}
    options = pool.options(pool.threads if pool.gpu else os.cpu_count())
    for name, audio in (("short", clips.short), ("long", clips.long)):
        started = time.perf_counter()
        text = " ".join(s.text for s in engine.transcribe(audio, options))  # warm-up
        times = [] if reps > 1 else [1000 * (time.perf_counter() - started)]
        for _ in range(reps if reps > 1 else 0):
            if budget.left() < 0:
                break
            start = time.perf_counter()
            engine.transcribe(audio, options)
            times.append(1000 * (time.perf_counter() - start))
        out[name] = {
            "audio_s": round(audio.size / RATE, 2),
            "runs": len(times),
            "p50_ms": pct(times, 50),
            "p99_ms": pct(times, 99),
            "wer": round(wer(clips.refs[name], text), 3),
        }
    return out


def files(
    pool: Pool, clips: Clips, levels: list[int], level_s: float, budget: Budget
) -> list[dict[str, Any]]:
    """30 s clips by ``jobs`` concurrent jobs (at most one per engine instance)
    for about ``level_s`` each: audio seconds per wall second."""
    rows: list[dict[str, Any]] = []
    cores = os.cpu_count() or 1
    for jobs in levels:
        if budget.left() < level_s:
            rows.append({"jobs": jobs, "skipped": "time budget"})
            continue
        workers = min(jobs, len(pool.engines))
        threads = pool.threads if pool.gpu else max(1, cores // workers)
        start = time.perf_counter()
        done = _busy(pool, clips.file, workers, threads, time.monotonic() + level_s)
        wall = time.perf_counter() - start
        rows.append(
            {
                "jobs": jobs,
                "instances": workers,
                "clips": len(done),
                "audio_s_per_s": round(sum(done) / wall, 1),
            }
        )
    return rows


def _busy(pool: Pool, audio: np.ndarray, workers: int, threads: int, stop_at: float) -> list[float]:
    """Transcribe ``audio`` over and over on ``workers`` instances until ``stop_at``."""
    done: list[float] = []

    def work(engine: Engine) -> None:
        while time.monotonic() < stop_at or not done:
            engine.transcribe(audio, pool.options(threads))
            done.append(audio.size / RATE)

    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(work, pool.engines[:workers]))
    return done


@dataclass(order=True)
class _Job:
    due: float
    rank: int  # 0 final, 1 partial
    seq: int
    stream: int = field(compare=False)
    utterance: int = field(compare=False)
    audio: np.ndarray = field(compare=False, repr=False)
    speech_end: float = field(compare=False)


def streams(pool: Pool, clips: Clips, count: int, grace_s: float) -> dict[str, Any]:
    """``count`` real-time streams on the pool, finals before partials."""
    instances = pool.engines
    threads = pool.threads
    silence = RATE  # 1 s after each utterance
    t0 = time.monotonic() + 0.5
    schedule: list[_Job] = []
    seq = 0
    for s in range(count):
        t = t0 + s * 2.0 / count
        for u, audio in enumerate(clips.utterances):
            end = t + audio.size / RATE
            for k in range(1, int(audio.size / RATE / PARTIAL_EVERY_S) + 1):
                cut = audio[: int(k * PARTIAL_EVERY_S * RATE)]
                schedule.append(_Job(t + k * PARTIAL_EVERY_S, 1, seq, s, u, cut, end))
                seq += 1
            schedule.append(_Job(end + MIN_SILENCE_S, 0, seq, s, u, audio, end))
            seq += 1
            t = end + silence / RATE
    schedule.sort(key=lambda j: j.due)
    last_due = schedule[-1].due
    queue: list[tuple[int, float, int, _Job]] = []
    finalised: set[tuple[int, int]] = set()
    latencies: list[float] = []
    partials = {"done": 0, "dropped": 0}
    lock = threading.Condition()
    finished = threading.Event()

    def worker(engine: Engine) -> None:
        while True:
            with lock:
                while not queue and not finished.is_set():
                    lock.wait(0.05)
                if not queue:
                    return
                _, _, _, job = heapq.heappop(queue)
                if job.rank and (job.stream, job.utterance) in finalised:
                    partials["dropped"] += 1
                    continue
                if not job.rank:
                    finalised.add((job.stream, job.utterance))
            engine.transcribe(job.audio, pool.options(threads))
            with lock:
                if job.rank:
                    partials["done"] += 1
                else:
                    latencies.append(time.monotonic() - job.speech_end)

    with ThreadPoolExecutor(len(instances)) as ex:
        for engine in instances:
            ex.submit(worker, engine)
        for job in schedule:
            delay = job.due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            with lock:
                heapq.heappush(queue, (job.rank, job.due, job.seq, job))
                lock.notify()
        deadline = last_due + grace_s
        while time.monotonic() < deadline:
            with lock:
                if not queue:
                    break
            time.sleep(0.05)
        finished.set()
        with lock:
            unfinished = sum(1 for *_, j in queue if not j.rank)
            queue.clear()
    expected = count * len(clips.utterances)
    p95 = pct(latencies, 95)
    held = len(latencies) == expected and unfinished == 0 and (p95 or 99) <= TARGET_P95_S
    return {
        "streams": count,
        "instances": len(instances),
        "finals": len(latencies),
        "expected_finals": expected,
        "final_p50_s": pct(latencies, 50),
        "final_p95_s": p95,
        "partials_done": partials["done"],
        "partials_dropped": partials["dropped"],
        "held": held,
    }


def run_one(
    model: Path, device: str, clips: Clips, cfg: argparse.Namespace, budget: Budget
) -> dict[str, Any]:
    gpu = device != "cpu"
    index = int(device.partition(":")[2] or 0)
    monitor = GpuMonitor(index) if gpu else None
    if gpu and (monitor is None or not monitor.available):
        return {
            "model": model.name,
            "device": device,
            "error": "no nvidia-smi or pynvml: no GPU here",
        }
    result: dict[str, Any] = {"model": model.name, "device": device}
    try:
        load = time.perf_counter()
        pool = load_pool(model, device, monitor, 1 if cfg.quick else MAX_INSTANCES)
    except VoxwireError as exc:
        return {**result, "error": str(exc)}
    result.update(
        engine_device=pool.device,
        instances=len(pool.engines),
        mib_per_instance=pool.mib_per_instance,
        load_s=round(time.perf_counter() - load, 1),
    )
    try:
        phases = [
            ("latency", lambda: clip_latency(pool, clips, cfg.reps, budget)),
            ("files", lambda: files(pool, clips, cfg.jobs, cfg.level_s, budget)),
            ("streams", lambda: sweep_streams(pool, clips, cfg, budget)),
        ]
        for name, phase in phases:
            if monitor is not None:
                with monitor:
                    result[name] = phase()
                result[f"{name}_gpu"] = monitor.summary()
            else:
                result[name] = phase()
    finally:
        pool.close()
    return result


def sweep_streams(
    pool: Pool, clips: Clips, cfg: argparse.Namespace, budget: Budget
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    level_s = 2.5 + sum(u.size / RATE + 1 for u in clips.utterances) + cfg.grace_s
    for count in cfg.streams:
        if budget.left() < level_s:
            rows.append({"streams": count, "skipped": "time budget"})
            continue
        row = streams(pool, clips, count, cfg.grace_s)
        rows.append(row)
        print(
            f"    {count} streams: p95 {row['final_p95_s']} s, held {row['held']}", file=sys.stderr
        )
        if not row["held"]:
            break
    return rows


def machine() -> dict[str, Any]:
    """The card, driver and CUDA version (nvidia-smi), the cores, whisper.cpp's build."""
    info: dict[str, Any] = {"cpu_cores": os.cpu_count()}
    try:
        query = "name,driver_version,memory.total,compute_cap"
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
        info["gpus"] = [line.strip() for line in out.splitlines() if line.strip()]
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10).stdout
        found = re.search(r"CUDA Version:\s*([\d.]+)", header)
        info["cuda"] = found[1] if found else None
    except (OSError, subprocess.SubprocessError):
        info["gpus"] = []
    try:
        from voxwire.workers.engines.ggml_devices import system_info

        info["whispercpp"] = system_info().strip()
    except ImportError as exc:
        info["whispercpp"] = f"not importable: {exc}"
    return info


def table(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        head = f"{r['model']} on {r.get('engine_device', r['device'])}"
        if "error" in r:
            lines.append(f"{head}: {r['error']}")
            continue
        lat = r["latency"]
        lines.append(
            f"{head}: {r['instances']} instance(s), {r['mib_per_instance'] or '-'} MiB each, "
            f"loaded in {r['load_s']} s"
        )
        for name in ("short", "long"):
            x = lat[name]
            lines.append(
                f"  clip {x['audio_s']:>5} s   p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms  "
                f"WER {x['wer']}"
            )
        for f in r["files"]:
            lines.append(
                f"  files {f['jobs']:>3} jobs  "
                + (
                    f"{f['audio_s_per_s']} audio s / s ({f['clips']} clips)"
                    if "clips" in f
                    else f["skipped"]
                )
            )
        for s in r["streams"]:
            if "skipped" in s:
                lines.append(f"  streams {s['streams']:>3}  {s['skipped']}")
                continue
            lines.append(
                f"  streams {s['streams']:>3}  final p50 {s['final_p50_s']} s  "
                f"p95 {s['final_p95_s']} s  finals {s['finals']}/{s['expected_finals']}  "
                f"held {s['held']}"
            )
        for phase in ("latency", "files", "streams"):
            g = r.get(f"{phase}_gpu")
            if g:
                lines.append(
                    f"  GPU during {phase}: util mean {g['gpu_util_mean']}% "
                    f"max {g['gpu_util_max']}%, memory max {g['gpu_mem_max_mib']} MiB"
                )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated ggml files or CT2 folders")
    parser.add_argument("--devices", default="cuda,cpu")
    parser.add_argument("--clips", type=Path, help=".npz from --write-clips (default: shared/eval)")
    parser.add_argument("--budget-s", type=float, default=420)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true", help="small settings, for a CPU check")
    parser.add_argument("--write-clips", type=Path, help="write the eval clips here and stop")
    cfg = parser.parse_args()
    if cfg.write_clips:
        Clips.from_eval().save(cfg.write_clips)
        print(f"wrote {cfg.write_clips}")
        return 0
    models = [Path(m) for m in cfg.models.split(",") if m]
    if not models:
        from voxwire.models import resolve

        models = [resolve("tiny.en-q5_0")]
    clips = Clips.load(cfg.clips) if cfg.clips else Clips.from_eval()
    cfg.reps = 1 if cfg.quick else 20
    cfg.jobs = [1, 2] if cfg.quick else [1, 2, 4, 8, 16, 32, 64]
    cfg.streams = [1, 2] if cfg.quick else [16, 32, 64, 128, 256]
    cfg.level_s = 1.0 if cfg.quick else 8.0
    cfg.grace_s = 5.0 if cfg.quick else 10.0
    if cfg.quick:
        clips.quick = True
        clips.utterances = clips.utterances[:2]
    devices = cfg.devices.split(",")
    results = []
    runs = [(m, d) for m in models for d in devices]
    start = time.monotonic()
    weights = [2.0 if device == "cpu" else 3.0 for _, device in runs]  # the GPU first
    for i, (model, device) in enumerate(runs):
        left = start + cfg.budget_s - time.monotonic()
        share = left * weights[i] / sum(weights[i:])
        print(f"{model.name} on {device} ({share:.0f} s)", file=sys.stderr)
        results.append(run_one(model, device, clips, cfg, Budget(share)))
    host = machine()
    print(f"machine: {host}")
    print(table(results))
    if cfg.json:
        cfg.json.write_text(json.dumps({"machine": host, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
