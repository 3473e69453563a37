"""The bridge ingest's cost of forwarding only this installation's audio.

On a shared broker the ingest asks its store whether a chunk's session is this
installation's (:mod:`voxwire.bridge.sessions_gate`). Measured here in one run,
against the servers of `make services` (Mosquitto, Kafka, PostgreSQL):

1. ingest: a backlog of ``--count`` audio chunks (100 ms of PCM16, 3,200 bytes)
   over ``--sessions`` sessions, queued by Mosquitto for the ingest's
   persistent session while it is away, then drained by a
   :class:`~voxwire.bridge.ingest.MqttIngest` into Kafka; chunks/s from its
   connect until the last one is forwarded (or dropped), for: no check (the
   embedded broker's ingest, the baseline), the check with every session ours,
   and the check with half of the sessions another installation's. Rounds
   alternate the variants; the best of ``--rounds`` is reported.
2. gate alone: what :meth:`SessionGate.admit` adds to a chunk whose session is
   known (the steady state of a stream), in-process, in microseconds.

    set -a; eval "$(scripts/services.sh env)"; set +a
    .venv/bin/python benchmarks/bench_ingest_gate.py [--count 10000] [--sessions 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from voxwire.bridge.ingest import MqttIngest
from voxwire.bridge.sessions_gate import SessionGate
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.namespaced import NamespacedBus
from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init
from voxwire.core.config import Settings, load_settings
from voxwire.platform.brokers import broker_address
from voxwire.store import SessionRecord
from voxwire.store.postgres import PostgresStore
from voxwire_client.messages import SessionStatus

CHUNK = bytes(3200)
VARIANTS = ("no check", "check, all ours", "check, half foreign")


def _ingest(
    settings: Settings,
    bus: NamespacedBus,
    client_id: str,
    is_ours: Callable[[str], Awaitable[bool]] | None,
) -> MqttIngest:
    host, port = broker_address(settings)
    return MqttIngest(
        bus,
        host,
        port,
        client_id=client_id,
        username=settings.servers.mqtt_username,
        password=settings.servers.mqtt_password.get_secret_value(),
        share_group=None,
        session_expiry_s=300,
        is_ours=is_ours,
    )


async def _connected(ingest: MqttIngest) -> asyncio.Task[None]:
    task = asyncio.create_task(ingest.run())
    while not ingest.connected:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # its SUBSCRIBEs answered
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _publish(settings: Settings, topics: list[str]) -> None:
    host, port = broker_address(settings)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-pub-" + secrets.token_hex(3))
    client.username_pw_set(
        settings.servers.mqtt_username, settings.servers.mqtt_password.get_secret_value()
    )
    client.max_inflight_messages_set(1000)
    client.connect(host, port)
    client.loop_start()
    infos = [client.publish(topic, CHUNK, qos=1) for topic in topics]
    for info in infos:
        info.wait_for_publish(60)
    client.disconnect()
    client.loop_stop()


async def drain(
    settings: Settings,
    bus: NamespacedBus,
    topics: list[str],
    is_ours: Callable[[str], Awaitable[bool]] | None,
) -> float:
    """chunks/s: the backlog of ``topics`` drained by a fresh ingest."""
    client_id = "bench-ingest-" + secrets.token_hex(3)
    await _stop(await _connected(_ingest(settings, bus, client_id, is_ours)))  # its session
    await asyncio.to_thread(_publish, settings, topics)
    ingest = _ingest(settings, bus, client_id, is_ours)
    started = time.perf_counter()
    task = await _connected(ingest)
    while ingest.forwarded + ingest.foreign < len(topics):
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    await _stop(task)
    return len(topics) / elapsed


async def gate_alone(count: int) -> tuple[float, float]:
    """µs per chunk: deciding directly, and through the gate with the sid known."""

    async def is_ours(_sid: str) -> bool:
        return True

    decided = [0]

    def decide(_message: int, _ours: bool) -> None:
        decided[0] += 1

    gate: SessionGate[int] = SessionGate(is_ours, decide)
    gate.admit("s", 0)
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    for n in range(count):
        decide(n, True)
    direct = time.perf_counter() - started
    started = time.perf_counter()
    for n in range(count):
        gate.admit("s", n)
    gated = time.perf_counter() - started
    return direct / count * 1e6, gated / count * 1e6


async def main(count: int, sessions: int, rounds: int) -> None:
    settings = load_settings(mode="distributed")
    namespace = "bench" + secrets.token_hex(3)
    kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=namespace)
    bus = NamespacedBus(
        KafkaBus(settings.servers.kafka_bootstrap, client_id="bench"), f"{namespace}."
    )
    store = await PostgresStore.open(
        settings.servers.postgres_dsn.get_secret_value(), schema=namespace
    )
    try:
        tenant = await store.create_tenant("bench")
        ours = [f"s_ours{n:04d}" for n in range(sessions)]
        for sid in ours:
            record = SessionRecord(sid, tenant.id, SessionStatus.QUEUED, datetime.now(UTC))
            await store.create_session(record)
        foreign = [f"s_theirs{n:04d}" for n in range(sessions)]
        mixed = [sid for pair in zip(ours, foreign, strict=True) for sid in pair]

        async def is_ours(sid: str) -> bool:
            return await store.session_owner(sid) is not None

        def backlog(sids: list[str]) -> list[str]:
            return [f"audio/{sids[n % len(sids)]}/chunk/{n // len(sids)}" for n in range(count)]

        runs: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(rounds):
            runs[VARIANTS[0]].append(await drain(settings, bus, backlog(ours), None))
            runs[VARIANTS[1]].append(await drain(settings, bus, backlog(ours), is_ours))
            runs[VARIANTS[2]].append(await drain(settings, bus, backlog(mixed), is_ours))
        base = max(runs[VARIANTS[0]])
        print(f"ingest, {count} chunks over {sessions} sessions, best of {rounds}:")
        for variant, rates in runs.items():
            best = max(rates)
            every = ", ".join(f"{r:,.0f}" for r in rates)
            print(f"  {variant:<20} {best:8,.0f} chunks/s  ({best / base:.2f}x; rounds: {every})")
        direct, gated = await gate_alone(200_000)
        print(
            f"gate alone, sid known: {gated:.2f} µs per chunk "
            f"(deciding without it: {direct:.2f} µs; added {gated - direct:.2f} µs)"
        )
    finally:
        await store.close()
        await bus.close()
        _drop(settings, namespace)


def _drop(settings: Settings, namespace: str) -> None:
    import psycopg
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": settings.servers.kafka_bootstrap})
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{namespace}.")]
    for future in admin.delete_topics(mine).values() if mine else ():
        future.result(30)
    with psycopg.connect(settings.servers.postgres_dsn.get_secret_value(), autocommit=True) as db:
        db.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')  # type: ignore[arg-type]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.sessions, args.rounds))
