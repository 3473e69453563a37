"""Chaos soak: the distributed platform with two gateways, two bridges and two
workers, under a steady mix of live streams, uploads and searches, while
faults are injected at random (``evaluation/chaos_faults.py``: kill -9 and
SIGTERM of each role, restarts of Kafka, PostgreSQL, Redis, Mosquitto and
OpenSearch, a frozen worker). At the end an audit reads every session from the
store, the history API, the retained MQTT messages and the search index and
counts what was lost, duplicated, left unfinished or missing from search, per
fault kind (``evaluation/chaos_audit.py`` defines each figure).

The load, all through the Python SDK:
- live streams (``--streams`` at a time): the eval utterances of
  ``evaluation.corpus.UTTERANCES`` played in real time from a random one on,
  after a random pause;
- an upload of a short eval recording every ``--upload-every-s`` (on average);
- a search every ``--search-every-s``.
The clients reach the gateways through a small TCP balancer (as a Kubernetes
Service would): a connection goes to the next gateway that accepts it.

It restarts the servers that ``scripts/services.sh env`` reports: run it on a
private set (``VOXWIRE_SERVICES_DIR`` and the ports, see docs/benchmarks.md),
never on servers others use at the same time.

Writes ``<out>/chaos.json`` and ``<out>/chaos.md``.

    python benchmarks/bench_chaos.py [--duration-s 600] [--seed 1] [--faults all]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.chaos_audit import (  # noqa: E402
    Observed,
    Stored,
    judge,
    markdown,
    retained_results,
    search_phrase,
    table,
)
from evaluation.chaos_faults import FaultDriver, parse_kinds  # noqa: E402
from evaluation.corpus import UTTERANCES, eval_with_text, joined_utterances  # noqa: E402
from evaluation.distributed import DistributedPlatform  # noqa: E402
from evaluation.ports import free_port  # noqa: E402
from voxwire_client import AsyncClient, pcm_chunks  # noqa: E402
from voxwire_client.messages import Message, SegmentMessage  # noqa: E402

GATEWAYS = ("gateway", "gateway-1")
FOLLOW_TIMEOUT_S = 300.0
"""A session's subscriber gives up this long after the session began."""


# -- the balancer in front of the gateways ---------------------------------------------


async def balancer(ports: list[int]) -> tuple[asyncio.Server, int]:
    """A TCP listener that hands each connection to the first of ``ports``
    (in rotation) that accepts it."""
    turn = [0]

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in range(len(ports) * 3):
            port = ports[(turn[0] + i) % len(ports)]
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), 2
                )
            except (OSError, TimeoutError):
                await asyncio.sleep(0.2 * (i // len(ports)))
                continue
            turn[0] += 1
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            return
        writer.close()

    port = free_port()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    return server, port


# -- the load --------------------------------------------------------------------------


class Load:
    """Streams, uploads and searches against ``url`` until :meth:`stop`."""

    def __init__(self, platform: DistributedPlatform, url: str, rng: random.Random) -> None:
        self.platform, self.url, self.rng = platform, url, rng
        self.started = time.monotonic()
        self.sessions: list[Observed] = []
        self.searches = {"ok": 0, "failed": 0}
        self.search_failures: list[str] = []
        """When a search failed (seconds into the soak) and why."""
        self.refused: list[str] = []
        """Sessions a gateway refused or a client could not open (no sid)."""
        self.expected: dict[Path, int] = {}
        self.warm_sids: set[str] = set()
        self.files = sorted((i.path for i in eval_with_text() if i.duration_s <= 7), key=str)[:6]
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def now(self) -> float:
        return time.monotonic() - self.started

    def client(self) -> AsyncClient:
        return AsyncClient(self.url, self.platform.api_key, self.platform.mqtt_url, timeout=30)

    def _record(self, seen: Observed) -> Any:
        def on_event(message: Message) -> None:
            seen.sid = seen.sid or message.sid
            index = message.segment.index if isinstance(message, SegmentMessage) else None
            seen.events.append((self.now(), message.seq, message.type, index))

        return on_event

    async def warm_up(self) -> None:
        """Each upload file once without faults: the finals it gives (``E`` of an upload)."""
        for path in self.files:
            seen = await self.upload(path, expected=0)
            self.expected[path] = len(set(seen.received()))
            self.warm_sids.add(seen.sid)
        self.sessions.clear()

    async def upload(self, path: Path, expected: int) -> Observed:
        seen = Observed("upload", path.name, expected, self.now())
        try:
            async with self.client() as client:
                created = await client.upload(path)
                seen.sid = created.sid
                self.sessions.append(seen)
                await asyncio.wait_for(
                    client.follow(created.sid, on_event=self._record(seen)), FOLLOW_TIMEOUT_S
                )
        except Exception as exc:  # counted by the audit
            seen.error = f"{type(exc).__name__}: {exc}"[:300]
            if not seen.sid:
                self.refused.append(f"upload {path.name}: {seen.error}")
        seen.ended = self.now()
        return seen

    async def stream(self) -> None:
        first = self.rng.randrange(len(UTTERANCES))
        pcm, spans, _ = joined_utterances()
        start = int(spans[first][0]) * 32  # bytes of PCM16 at 16 kHz per ms
        seen = Observed("stream", f"utterances {first}-", len(UTTERANCES) - first, self.now())
        self.sessions.append(seen)
        try:
            async with self.client() as client:
                await asyncio.wait_for(
                    client.stream(pcm_chunks(pcm[start:]), on_event=self._record(seen)),
                    FOLLOW_TIMEOUT_S,
                )
        except Exception as exc:  # counted by the audit
            seen.error = f"{type(exc).__name__}: {exc}"[:300]
        seen.ended = self.now()
        if not seen.sid:
            self.sessions.remove(seen)
            self.refused.append(f"stream: {seen.error or 'no message'}")

    async def _stream_loop(self) -> None:
        while not self._stopping.is_set():
            await self._pause(self.rng.uniform(0, 15))
            if not self._stopping.is_set():
                await self.stream()

    async def _upload_loop(self, every_s: float) -> None:
        while not self._stopping.is_set():
            await self._pause(every_s * self.rng.uniform(0.5, 1.5))
            if not self._stopping.is_set():
                path = self.rng.choice(self.files)
                self._spawn(self.upload(path, self.expected[path]))

    async def _search_loop(self, every_s: float) -> None:
        words = ["fellow", "country", "thousand thoughts", "gospel", "sorrow", "amiable"]
        while not self._stopping.is_set():
            await self._pause(every_s)
            try:
                async with self.client() as client:
                    await client.search(self.rng.choice(words))
                self.searches["ok"] += 1
            except Exception as exc:  # counted
                self.searches["failed"] += 1
                self.search_failures.append(
                    f"{self.now():.0f} s: {type(exc).__name__}: {exc}"[:200]
                )

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self, streams: int, upload_every_s: float, search_every_s: float) -> None:
        loops = [self._stream_loop() for _ in range(streams)]
        loops += [self._upload_loop(upload_every_s), self._search_loop(search_every_s)]
        for loop in loops:
            self._spawn(loop)

    async def stop(self, drain_s: float, faults: tuple[threading.Event, Any]) -> None:
        """No new sessions and no new faults (``faults``: the driver's stop event
        and its task); wait up to ``drain_s`` for the open sessions to end."""
        self._stopping.set()
        faults[0].set()
        await faults[1]
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=drain_s)
        for task in set(self._tasks):
            task.cancel()


# -- the audit's reads -----------------------------------------------------------------


async def read_store(platform: DistributedPlatform, sids: list[str]) -> dict[str, Stored]:
    """Every session of the run as the store keeps it (what the history API serves)."""
    from voxwire.platform import build

    kept: dict[str, Stored] = {}
    async with build(platform.settings) as built:
        store = await built.adapters.store()
        every = []
        after = ""
        while page := await store.all_sessions(after=after):
            every += page
            after = page[-1].sid
        for record in every:
            messages: list[Message] = []
            while batch := await store.messages_after(
                record.sid, messages[-1].seq if messages else 0
            ):
                messages += batch
            finals = [m for m in messages if isinstance(m, SegmentMessage) and m.type == "final"]
            kept[record.sid] = Stored(
                status=str(record.status),
                seqs=[m.seq for m in messages],
                finals=[f.segment.index for f in finals],
                first_final=finals[0].segment.text if finals else "",
            )
    missing = [sid for sid in sids if sid not in kept]
    if missing:
        print(f"{len(missing)} sessions the clients opened are not in the store", file=sys.stderr)
    return kept


async def read_apis(load: Load, kept: dict[str, Stored]) -> None:
    """The history API's ``seq`` list and the search index's answer, per session."""
    async with load.client() as client:
        for sid, stored in kept.items():
            seqs: list[int] = []
            with contextlib.suppress(Exception):
                while True:
                    page = await client.history(sid, after=seqs[-1] if seqs else 0)
                    seqs += [m.seq for m in page.messages]
                    if not page.messages or seqs[-1] >= page.last_seq:
                        break
                stored.history_seqs = seqs
            phrase = search_phrase(stored.first_final)
            if stored.status == "completed" and phrase:
                with contextlib.suppress(Exception):
                    hits = await client.search(phrase, sids=(sid,))
                    stored.found = bool(hits.hits)


def mqtt_service(platform: DistributedPlatform) -> dict[str, Any]:
    url = urlsplit(platform.mqtt_url)
    return {
        "host": url.hostname or "127.0.0.1",
        "port": url.port or 1883,
        "username": platform.env.get("VOXWIRE_MQTT_USERNAME", ""),
        "password": platform.env.get("VOXWIRE_MQTT_PASSWORD", ""),
    }


# -- the run ---------------------------------------------------------------------------


async def soak(args: argparse.Namespace, platform: DistributedPlatform) -> dict[str, Any]:
    ports = [int(platform.gateway_url(name).rsplit(":", 1)[1]) for name in GATEWAYS]
    server, port = await balancer(ports)
    load = Load(platform, f"http://127.0.0.1:{port}", random.Random(args.seed))
    print(f"warm-up: {len(load.files)} uploads without faults", file=sys.stderr)
    await load.warm_up()
    load.started = time.monotonic()
    driver = FaultDriver(
        platform,
        parse_kinds(args.faults),
        random.Random(args.seed + 1),
        args.mean_fault_gap_s,
        started=load.started,
    )
    last_fault_s = args.duration_s - 20
    plan = driver.schedule(args.first_fault_s, last_fault_s)
    stop, supervised = threading.Event(), threading.Event()
    injector = asyncio.create_task(asyncio.to_thread(driver.run, plan, stop, last_fault_s))
    # processes that exit are started again until the audit is over, as Kubernetes would
    supervisor = asyncio.create_task(asyncio.to_thread(driver.supervise, supervised))
    try:
        await load.run(args.streams, args.upload_every_s, args.search_every_s)
        await asyncio.sleep(args.duration_s)
        end = load.now()
        print(f"load stopped at {end:.0f} s; draining", file=sys.stderr)
        await load.stop(args.drain_s, faults=(stop, injector))
        await asyncio.sleep(5)  # the search index refreshes on its own
        kept = await read_platform(platform, load)
    finally:
        stop.set()
        supervised.set()
        server.close()
        await asyncio.gather(injector, supervisor, return_exceptions=True)
    verdicts = {i: judge(s, kept.get(s.sid)) for i, s in enumerate(load.sessions)}
    return {
        "seed": args.seed,
        "duration_s": args.duration_s,
        "faults": [asdict(f) for f in driver.faults],
        "crashes": [asdict(c) for c in driver.crashes],
        "rows": table(driver.faults, load.sessions, verdicts, end, driver.crashes),
        "sessions": [
            {**asdict(s), "events": len(s.events), "verdict": asdict(verdicts[i])}
            for i, s in enumerate(load.sessions)
        ],
        "stored_not_opened_by_clients": {
            sid: kept[sid].status
            for sid in sorted(set(kept) - {s.sid for s in load.sessions} - load.warm_sids)
        },
        "refused": load.refused,
        "searches": load.searches,
        "search_failures": load.search_failures,
        "retained_stale": sum(v.retained_stale for v in verdicts.values()),
        "history_mismatch": sum(v.history_mismatch for v in verdicts.values()),
    }


async def read_platform(platform: DistributedPlatform, load: Load) -> dict[str, Stored]:
    """The store, the history and search APIs and the retained messages, per session."""
    kept = await read_store(platform, [s.sid for s in load.sessions])
    await read_apis(load, kept)
    retained = await asyncio.to_thread(retained_results, mqtt_service(platform), set(kept))
    for sid, kind in retained.items():
        kept[sid].retained = kind
    return kept


def write_outputs(out: Path, result: dict[str, Any]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos.json").write_text(json.dumps(result, indent=2, default=str))
    faulty = [f for f in result["faults"] if f["error"]]
    crashes = result["crashes"]
    lines = [
        f"# Chaos soak: {result['duration_s']} s, seed {result['seed']}",
        "",
        markdown(result["rows"]),
        "",
        f"- sessions refused or never opened: {len(result['refused'])}",
        "- sessions in the store no client learned of (its request failed), by status: "
        + str(Counter(result["stored_not_opened_by_clients"].values())),
        f"- retained result not the final transcript: {result['retained_stale']}",
        f"- history API differs from the store: {result['history_mismatch']}",
        f"- searches: {result['searches']['ok']} answered, {result['searches']['failed']} failed",
        f"- faults that failed to inject: {len(faulty)}",
        f"- processes that exited on their own (started again): {len(crashes)}",
    ]
    lines += [
        f"  - {c['target']} at {c['at']:.0f} s: {c['said'].splitlines()[-1:]}" for c in crashes
    ]
    lines += [f"  - {f['kind']} {f['target']}: {f['error']}" for f in faulty]
    lines += [f"  - refused: {r}" for r in result["refused"][:10]]
    text = "\n".join(lines) + "\n"
    (out / "chaos.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default="all", help="kinds, roles or servers, or all")
    parser.add_argument("--mean-fault-gap-s", type=float, default=30)
    parser.add_argument("--first-fault-s", type=float, default=20)
    parser.add_argument("--streams", type=int, default=2, help="live streams at a time")
    parser.add_argument("--upload-every-s", type=float, default=8)
    parser.add_argument("--search-every-s", type=float, default=5)
    parser.add_argument("--drain-s", type=float, default=240)
    parser.add_argument("--keep-logs", type=Path, help="copy the processes' logs here")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    parse_kinds(args.faults)  # a wrong kind stops here, before anything starts
    with tempfile.TemporaryDirectory() as tmp:
        platform = DistributedPlatform(Path(tmp), workers=2)
        platform.start()
        try:
            platform.spawn("bridge-1", ingest_client_id=f"voxwire-ingest-{platform.namespace}-1")
            platform.spawn("gateway-1", http_port=str(free_port()))
            platform.wait_ready(gateway="gateway-1")
            result = asyncio.run(soak(args, platform))
        finally:
            if args.keep_logs:
                import shutil

                shutil.copytree(platform.log_dir, args.keep_logs, dirs_exist_ok=True)
            platform.stop()
    print(write_outputs(args.out, result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
