"""Bridge delivery: the MQTT ceiling, then Kafka -> bridge -> Mosquitto -> subscriber.

All in one run against the servers of `make services`, with the same ~1 KB
QoS 1 payloads, the subscriber in a process of its own (in the publisher's
process its clock was delayed by the publishing: the ceiling read 5.2k msg/s
with it there, 7.5k with it apart). Three paths:

1. ceiling: a paho publisher -> Mosquitto -> a paho subscriber;
2. Kafka floor: records produced and consumed (and committed) by a
   subscription in this process: the latency the bridge starts from;
3. bridge: records produced to Kafka's results topic, relayed by a
   `voxwire bridge` process (store in PostgreSQL, publish
   to Mosquitto) to the subscriber.

Throughput: a backlog of ``--count`` messages, as fast as each path drains it
(the bridge is started once the backlog is in Kafka). Latency: each path paced
at each of ``--rates`` for 5 s (``half`` is half the ceiling's throughput, the
rate the delivery target is set at). "Added" is the bridge's p99 minus the
ceiling's (the target) and minus the Kafka floor's (what the bridge itself
adds on top of Kafka).

Writes ``<out>/bridge.json`` and ``<out>/bridge.md``.

    set -a; eval "$(scripts/services.sh env)"; set +a
    .venv/bin/python benchmarks/bench_bridge.py [--count 20000] [--rates 200,1000,2000,half]
        [--out bench-results]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from voxwire.broker.mqtt import MqttConnection
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.namespaced import NamespacedBus
from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init
from voxwire.core.config import load_settings
from voxwire.platform.brokers import broker_address
from voxwire.wire.topics import RESULTS_TOPIC
from voxwire_client.messages import MatchMessage, encode_message

ROOT = Path(__file__).resolve().parents[1]


class Receiver:
    """A paho subscriber in a process of its own (so the publishing side never
    delays its clock) that notes when each message arrived, by ``seq``."""

    def __init__(self, host: str, port: int, user: str, password: str, topic: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_receive, args=(child, host, port, user, password, topic), daemon=True
        )

    def start(self) -> None:
        self._process.start()
        if not self._conn.poll(30) or self._conn.recv() != "ready":
            raise RuntimeError("the receiver did not subscribe within 30 s")

    def collect(self, first: int, last: int, timeout: float = 300) -> dict[int, float]:
        """Arrival times of seqs ``first..last``, once all came or ``timeout`` passed."""
        self._conn.send((first, last, timeout))
        arrivals: dict[int, float] = self._conn.recv()
        return arrivals

    def stop(self) -> None:
        self._conn.send(None)
        self._process.join(10)


def _receive(conn: Connection, host: str, port: int, user: str, pw: str, topic: str) -> None:
    arrivals: dict[int, float] = {}
    ready = threading.Event()

    def on_message(_c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        arrivals[int(json.loads(msg.payload)["seq"])] = time.time()

    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-rx-" + secrets.token_hex(3))
    client.username_pw_set(user, pw)
    client.max_inflight_messages_set(1000)
    client.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
    client.on_subscribe = lambda *_: ready.set()
    client.on_message = on_message
    client.connect(host, port)
    client.loop_start()
    ready.wait(10)
    conn.send("ready")
    while (request := conn.recv()) is not None:
        first, last, timeout = request
        deadline = time.monotonic() + timeout
        wanted = range(first, last + 1)
        while time.monotonic() < deadline and not all(s in arrivals for s in wanted):
            time.sleep(0.01)
        conn.send({s: arrivals.pop(s) for s in wanted if s in arrivals})
    client.disconnect()
    client.loop_stop()


def message(sid: str, seq: int) -> bytes:
    return encode_message(
        MatchMessage(
            sid=sid,
            seq=seq,
            prompt_id="p1",
            prompt="bench",
            score=1.0,
            start_ms=0,
            end_ms=1,
            text="x" * 700,
            highlight="<em>x</em>",
            segment_ids=("s",),
        )
    )


def percentiles(latencies: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(latencies, n=100)
    return q[49] * 1000, q[98] * 1000


PACED_S = 5.0


def pace(rate: float, send: Callable[[], object]) -> dict[int, float]:
    """Call ``send()`` rate*PACED_S times at ``rate`` per second; the send times, from 1."""
    sent: dict[int, float] = {}
    t0 = time.time()
    for i in range(1, int(rate * PACED_S) + 1):
        sent[i] = time.time()
        send()
        time.sleep(max(0.0, i / rate - (time.time() - t0)))
    return sent


async def produce_paced(
    bus: NamespacedBus, rate: float, record: Callable[[int], tuple[str, bytes]], first: int = 1
) -> dict[int, float]:
    """Produce ``record(i)`` (key, value) for rate*PACED_S values of i from ``first``,
    at ``rate`` per second, without waiting for each; the send times by i, once all
    were acknowledged."""
    sent: dict[int, float] = {}
    producing = []
    t0 = time.time()
    for n in range(1, int(rate * PACED_S) + 1):
        i = first + n - 1
        sent[i] = time.time()
        producing.append(asyncio.ensure_future(bus.produce(RESULTS_TOPIC, *record(i))))
        await asyncio.sleep(max(0.0, n / rate - (time.time() - t0)))
    await asyncio.gather(*producing)
    return sent


def latency(sent: dict[int, float], arrivals: dict[int, float]) -> dict[str, float]:
    latencies = [arrivals[s] - t for s, t in sent.items() if s in arrivals]
    p50, p99 = percentiles(latencies)
    return {"p50_ms": p50, "p99_ms": p99, "lost": len(sent) - len(latencies)}


class Ceiling:
    """paho -> Mosquitto -> paho."""

    def __init__(self, host: str, port: int, user: str, pw: str) -> None:
        self.sid = "bench" + secrets.token_hex(3)
        self.topic = f"transcription/{self.sid}/match"
        self.rx = Receiver(host, port, user, pw, f"transcription/{self.sid}/+")
        self.tx = MqttConnection(
            host,
            port,
            client_id="bench-tx-" + secrets.token_hex(3),
            username=user,
            password=pw,
            max_inflight=1000,
            session_expiry_s=60,
        )
        self.seq = 0

    def __enter__(self) -> Ceiling:
        self.rx.start()
        self.tx.connect()
        return self

    def __exit__(self, *_: object) -> None:
        self.tx.close()
        self.rx.stop()

    def throughput(self, count: int) -> dict[str, float]:
        first = self.seq + 1
        start = time.time()
        futures = [self._send() for _ in range(count)]
        arrivals = self.rx.collect(first, self.seq)
        elapsed = max(arrivals.values()) - start
        for f in futures:
            f.result(30)
        return {"msgs_per_s": len(arrivals) / elapsed, "lost": count - len(arrivals)}

    def paced(self, rate: float) -> dict[str, float]:
        base = self.seq
        sent = pace(rate, self._send)
        arrivals = self.rx.collect(base + 1, self.seq)
        return latency({base + i: t for i, t in sent.items()}, arrivals)

    def _send(self) -> Any:
        self.seq += 1
        return self.tx.publish(self.topic, message(self.sid, self.seq), retain=False)


async def kafka_floor(settings: Any, rate: float) -> dict[str, float]:
    """Produce -> consume -> commit through Kafka alone, paced at ``rate``."""
    namespace = "bench" + secrets.token_hex(3)
    kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=namespace)
    bus = NamespacedBus(
        KafkaBus(settings.servers.kafka_bootstrap, client_id="bench"), f"{namespace}."
    )
    subscription = bus.subscribe(RESULTS_TOPIC, "bench-floor")
    paced = int(rate * PACED_S)
    arrivals: dict[int, float] = {}

    async def consume() -> None:
        commits = []  # in the background, as the bridge commits
        while len(arrivals) <= paced:  # the warm-up record and 1..paced
            records = await subscription.next_batch(500)
            now = time.time()
            for record in records:
                arrivals[int(record.key)] = now
            commits.append(asyncio.create_task(subscription.commit(*records)))
        await asyncio.gather(*commits)

    consumer = asyncio.create_task(consume())
    await bus.produce(RESULTS_TOPIC, "0", b"warm-up")
    while 0 not in arrivals:  # the group has its partitions: the clock starts now
        await asyncio.sleep(0.01)
    sent = await produce_paced(bus, rate, lambda i: (str(i), b"x" * 1000))
    try:
        await asyncio.wait_for(consumer, 120)
    finally:
        await subscription.close()
        await bus.close()
    return latency(sent, arrivals)


async def bridge(settings: Any, count: int, rates: list[float]) -> list[dict[str, float]]:
    """The real `voxwire bridge` process (relay to PostgreSQL, Redis and Mosquitto,
    plus its ingest and indexer), fed through Kafka by this process: its drain
    throughput, then its latency at each rate."""
    namespace = "bench" + secrets.token_hex(3)
    kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=namespace)
    host, port = broker_address(settings)
    pw = settings.servers.mqtt_password.get_secret_value()
    bus = NamespacedBus(
        KafkaBus(settings.servers.kafka_bootstrap, client_id="bench"), f"{namespace}."
    )
    sid = "bench" + secrets.token_hex(3)
    rx = Receiver(host, port, settings.servers.mqtt_username, pw, f"transcription/{sid}/+")
    rx.start()
    # throughput: a backlog of `count` records, drained by a bridge started afterwards
    await asyncio.gather(
        *(bus.produce(RESULTS_TOPIC, sid, message(sid, i + 1)) for i in range(count))
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "voxwire.cli", "bridge"],
        env={**os.environ, "VOXWIRE_NAMESPACE": namespace, "VOXWIRE_INGEST_SESSION_EXPIRY_S": "60"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        drained = sorted((await asyncio.to_thread(rx.collect, 1, count)).values())
        rows = [
            {"msgs_per_s": len(drained) / (drained[-1] - drained[0]), "lost": count - len(drained)}
        ]
        seq = count
        for rate in rates:
            base = seq
            sent = await produce_paced(bus, rate, lambda i: (sid, message(sid, i)), base + 1)
            seq = base + len(sent)
            arrivals = await asyncio.to_thread(rx.collect, base + 1, seq)
            rows.append(latency(sent, arrivals))
    finally:
        process.terminate()
        process.wait(30)
        rx.stop()
        await bus.close()
    return rows


def parse_rates(text: str, ceiling_rate: float) -> list[float]:
    return [ceiling_rate / 2 if r == "half" else float(r) for r in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument(
        "--rates",
        default="200,1000,2000,half",
        help="paced rates for latency, msg/s; 'half' is half the ceiling (default: %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args()
    settings = load_settings(mode="distributed")
    host, port = broker_address(settings)
    pw = settings.servers.mqtt_password.get_secret_value()
    with Ceiling(host, port, settings.servers.mqtt_username, pw) as mqtt:
        mqtt.throughput(args.count)  # warm-up
        ceiling = mqtt.throughput(args.count)
        rates = parse_rates(args.rates, ceiling["msgs_per_s"])
        ceiling_rows = [mqtt.paced(rate) for rate in rates]
    floor_rows = [asyncio.run(kafka_floor(settings, rate)) for rate in rates]
    drain, *bridge_rows = asyncio.run(bridge(settings, args.count, rates))
    ratio = drain["msgs_per_s"] / ceiling["msgs_per_s"]
    result = {
        "count": args.count,
        "throughput": {"ceiling": ceiling, "bridge": drain, "ratio": ratio},
        "latency": [
            {"rate": rate, "ceiling": c, "kafka_floor": f, "bridge": b}
            for rate, c, f, b in zip(rates, ceiling_rows, floor_rows, bridge_rows, strict=True)
        ],
    }
    lines = [
        f"{args.count} QoS 1 messages of ~1 KB",
        "",
        "| path | msg/s | lost |",
        "|---|---|---|",
        f"| paho -> Mosquitto -> paho (ceiling) | {ceiling['msgs_per_s']:.0f} "
        f"| {ceiling['lost']:.0f} |",
        f"| Kafka -> bridge -> sub | {drain['msgs_per_s']:.0f} | {drain['lost']:.0f} |",
        "",
        f"bridge / ceiling throughput: {ratio:.2f} (target >= 0.8)",
        "",
        "| rate msg/s | ceiling p50 / p99 ms | Kafka floor p50 / p99 | bridge p50 / p99 "
        "| added p99 over ceiling | over Kafka floor | lost |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["latency"]:
        c, f, b = row["ceiling"], row["kafka_floor"], row["bridge"]
        lines.append(
            f"| {row['rate']:.0f} | {c['p50_ms']:.2f} / {c['p99_ms']:.2f} "
            f"| {f['p50_ms']:.2f} / {f['p99_ms']:.2f} | {b['p50_ms']:.2f} / {b['p99_ms']:.2f} "
            f"| {b['p99_ms'] - c['p99_ms']:.2f} | {b['p99_ms'] - f['p99_ms']:.2f} "
            f"| {c['lost'] + f['lost'] + b['lost']:.0f} |"
        )
    lines += ["", "target: added p99 over the ceiling <= 5 ms at half the ceiling's rate"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bridge.json").write_text(json.dumps(result, indent=2))
    (args.out / "bridge.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
