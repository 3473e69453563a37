"""Bridge delivery: the MQTT ceiling, then Kafka -> bridge -> Mosquitto -> subscriber.

Both in one run against the servers of `make services`, with the same ~1 KB
QoS 1 payloads, the subscriber in a process of its own (in the publisher's
process its clock was delayed by the publishing: the ceiling read 5.2k msg/s
with it there, 7.5k with it apart):

1. ceiling: a paho publisher -> Mosquitto -> a paho subscriber, as fast as it
   goes (throughput) and paced at a fixed rate (latency percentiles);
2. Kafka alone: records produced at the paced rate and consumed (and
   committed) by a subscription in this process: the latency floor the bridge
   starts from;
3. bridge: a backlog of records produced to Kafka's results topic, then drained
   by a `voxwire bridge` process (store in PostgreSQL, hot state in Redis,
   publish to Mosquitto) to a subscriber; then latency at a paced rate.

    set -a; eval "$(scripts/services.sh env)"; set +a
    .venv/bin/python benchmarks/bench_bridge.py [--count 20000] [--rate MSGS_PER_S]
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
from multiprocessing.connection import Connection
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from voxwire.broker.mqtt import MqttConnection
from voxwire.bus import RESULTS_TOPIC
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.namespaced import NamespacedBus
from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init
from voxwire.config import load_settings
from voxwire.distributed import broker_address
from voxwire_client.messages import MatchMessage, encode_message


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


def ceiling(host: str, port: int, user: str, pw: str, count: int, rate: float) -> dict[str, float]:
    sid = "bench" + secrets.token_hex(3)
    rx = Receiver(host, port, user, pw, f"transcription/{sid}/+")
    rx.start()
    tx = MqttConnection(
        host,
        port,
        client_id="bench-tx-" + secrets.token_hex(3),
        username=user,
        password=pw,
        max_inflight=1000,
        session_expiry_s=60,
    )
    tx.connect()
    topic = f"transcription/{sid}/match"
    start = time.time()
    futures = [tx.publish(topic, message(sid, i + 1), retain=False) for i in range(count)]
    arrivals = rx.collect(1, count)
    elapsed = max(arrivals.values()) - start
    for f in futures:
        f.result(30)
    throughput = len(arrivals) / elapsed
    # paced run for latency
    sent: dict[int, float] = {}
    paced = min(count, int(rate * 5))
    for i in range(paced):
        seq = count + i + 1
        sent[seq] = time.time()
        tx.publish(topic, message(sid, seq), retain=False)
        time.sleep(max(0.0, (i + 1) / rate - (time.time() - sent[count + 1])))
    arrivals = rx.collect(count + 1, count + paced)
    latencies = [arrivals[s] - t for s, t in sent.items() if s in arrivals]
    p50, p99 = percentiles(latencies)
    tx.close()
    rx.stop()
    return {
        "msgs_per_s": throughput,
        "lost": count - len(futures) + (paced - len(latencies)),
        "p50_ms": p50,
        "p99_ms": p99,
    }


async def kafka_floor(settings: Any, rate: float) -> dict[str, float]:
    """Produce -> consume -> commit through Kafka alone, paced at ``rate``."""
    namespace = "bench" + secrets.token_hex(3)
    kafka_init(settings.kafka_bootstrap, DEFAULT_TOPICS, namespace=namespace)
    bus = NamespacedBus(KafkaBus(settings.kafka_bootstrap, client_id="bench"), f"{namespace}.")
    subscription = bus.subscribe(RESULTS_TOPIC, "bench-floor")
    paced = int(rate * 5)
    sent: dict[int, float] = {}
    arrivals: dict[int, float] = {}

    async def consume() -> None:
        while len(arrivals) < paced:
            records = await subscription.next_batch(500)
            now = time.time()
            for record in records:
                arrivals[int(record.key)] = now
            await subscription.commit(*records)

    consumer = asyncio.create_task(consume())
    await bus.produce(RESULTS_TOPIC, "0", b"warm-up")
    producing = []
    t0 = time.time()
    for i in range(1, paced + 1):
        sent[i] = time.time()
        producing.append(asyncio.ensure_future(bus.produce(RESULTS_TOPIC, str(i), b"x" * 1000)))
        await asyncio.sleep(max(0.0, i / rate - (time.time() - t0)))
    await asyncio.gather(*producing)
    try:
        await asyncio.wait_for(consumer, 120)
    finally:
        await subscription.close()
        await bus.close()
    p50, p99 = percentiles([arrivals[i] - t for i, t in sent.items() if i in arrivals])
    return {"msgs_per_s": float("nan"), "lost": paced - len(sent), "p50_ms": p50, "p99_ms": p99}


async def bridge(settings: Any, count: int, rate: float) -> dict[str, float]:
    """The real `voxwire bridge` process (relay to PostgreSQL, Redis and Mosquitto,
    plus its ingest and indexer), fed through Kafka by this process."""
    namespace = "bench" + secrets.token_hex(3)
    kafka_init(settings.kafka_bootstrap, DEFAULT_TOPICS, namespace=namespace)
    host, port = broker_address(settings)
    pw = settings.mqtt_password.get_secret_value()
    bus = NamespacedBus(KafkaBus(settings.kafka_bootstrap, client_id="bench"), f"{namespace}.")
    sid = "bench" + secrets.token_hex(3)
    rx = Receiver(host, port, settings.mqtt_username, pw, f"transcription/{sid}/+")
    rx.start()
    # throughput: a backlog of `count` records, drained by a bridge started afterwards
    await asyncio.gather(
        *(bus.produce(RESULTS_TOPIC, sid, message(sid, i + 1)) for i in range(count))
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "voxwire.cli", "bridge"],
        env={**os.environ, "VOXWIRE_NAMESPACE": namespace},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        drained = sorted((await asyncio.to_thread(rx.collect, 1, count)).values())
        throughput = len(drained) / (drained[-1] - drained[0])
        lost = count - len(drained)
        # latency at a paced rate, the bridge running
        sent: dict[int, float] = {}
        paced = min(count, int(rate * 5))
        t0 = time.time()
        producing = []
        for i in range(paced):
            seq = count + i + 1
            sent[seq] = time.time()
            producing.append(
                asyncio.ensure_future(bus.produce(RESULTS_TOPIC, sid, message(sid, seq)))
            )
            await asyncio.sleep(max(0.0, (i + 1) / rate - (time.time() - t0)))
        await asyncio.gather(*producing)
        arrivals = await asyncio.to_thread(rx.collect, count + 1, count + paced)
    finally:
        process.terminate()
        process.wait(30)
        rx.stop()
        await bus.close()
    latencies = [arrivals[s] - t for s, t in sent.items() if s in arrivals]
    p50, p99 = percentiles(latencies)
    return {
        "msgs_per_s": throughput,
        "lost": lost + paced - len(latencies),
        "p50_ms": p50,
        "p99_ms": p99,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument(
        "--rate", type=float, help="paced rate for latency (default: half the ceiling)"
    )
    args = parser.parse_args()
    settings = load_settings(mode="distributed")
    host, port = broker_address(settings)
    pw = settings.mqtt_password.get_secret_value()
    rate = (
        args.rate
        or ceiling(host, port, settings.mqtt_username, pw, args.count, 1000)["msgs_per_s"] / 2
    )
    base = ceiling(host, port, settings.mqtt_username, pw, args.count, rate)
    floor = asyncio.run(kafka_floor(settings, rate))
    relayed = asyncio.run(bridge(settings, args.count, rate))
    print(f"{args.count} QoS 1 messages of ~1 KB; latency paced at {rate:.0f} msg/s")
    print(f"{'':<28}{'msg/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'lost':>8}")
    rows = (
        ("paho -> Mosquitto -> paho", base),
        ("Kafka -> consumer (floor)", floor),
        ("Kafka -> bridge -> sub", relayed),
    )
    for name, row in rows:
        print(
            f"{name:<28}{row['msgs_per_s']:>10.0f}{row['p50_ms']:>10.2f}{row['p99_ms']:>10.2f}"
            f"{row['lost']:>8.0f}"
        )
    print(
        f"bridge / ceiling throughput: {relayed['msgs_per_s'] / base['msgs_per_s']:.2f} "
        f"(target >= 0.8); added p99: {relayed['p99_ms'] - base['p99_ms']:.2f} ms (target <= 5)"
    )


if __name__ == "__main__":
    main()
