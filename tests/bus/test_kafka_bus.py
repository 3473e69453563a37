"""KafkaBus, kafka_init and the consumer lag gauge against a real broker.

The broker is ``$VOXWIRE_KAFKA_BOOTSTRAP`` (default 127.0.0.1:19092; start one
with ``scripts/services.sh start kafka``). When it cannot be reached these
tests are skipped, except under CI (``$CI`` set), where they fail. Every test
uses topics and groups of its own and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from prometheus_client import REGISTRY

from tests.services import frozen, service_pid
from voxwire.bus.base import Record
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.kafka_consumer import KafkaSubscription
from voxwire.bus.kafka_options import ConsumerOptions, KafkaOptions
from voxwire.bus.kafka_stats import consumer_lag
from voxwire.bus.topics import DEFAULT_TOPICS, CleanupPolicy, TopicSpec, kafka_init, topic_specs
from voxwire.core.errors import BusError, ConfigError

pytestmark = pytest.mark.timeout(60)

BOOTSTRAP = os.environ.get("VOXWIRE_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REPO = Path(__file__).resolve().parents[2]
# A short session so that a killed consumer's partitions move on quickly
# (6 s is the broker's group.min.session.timeout.ms).
FAST = KafkaOptions(consumer=ConsumerOptions(session_timeout_ms=6_000, heartbeat_interval_ms=2_000))


@dataclass
class Kafka:
    """Unique topics and groups for one test, deleted afterwards."""

    bootstrap: str
    admin: AdminClient
    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def topic(self, partitions: int = 1) -> str:
        name = f"test.bus.{uuid.uuid4().hex[:12]}"
        assert kafka_init(self.bootstrap, [TopicSpec(name=name, partitions=partitions)]) == [name]
        self.topics.append(name)
        return name

    def group(self) -> str:
        name = f"test-group-{uuid.uuid4().hex[:12]}"
        self.groups.append(name)
        return name

    def cleanup(self) -> None:
        for futures in (
            self.admin.delete_consumer_groups(self.groups, request_timeout=10)
            if self.groups
            else {},
            self.admin.delete_topics(self.topics, operation_timeout=30) if self.topics else {},
        ):
            for future in futures.values():
                # a group that never committed does not exist
                with contextlib.suppress(KafkaException):
                    future.result(timeout=30)


def _unreachable(bootstrap: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        admin.list_topics(timeout=5)
    except KafkaException as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def kafka_bootstrap() -> str:
    error = _unreachable(BOOTSTRAP)
    if error is not None:
        reason = f"Kafka is not reachable at {BOOTSTRAP} ({error}); scripts/services.sh start kafka"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return BOOTSTRAP


@pytest.fixture
def kafka(kafka_bootstrap: str) -> Iterator[Kafka]:
    state = Kafka(kafka_bootstrap, AdminClient({"bootstrap.servers": kafka_bootstrap}))
    yield state
    state.cleanup()


@pytest.fixture
async def bus(kafka: Kafka) -> AsyncIterator[KafkaBus]:
    bus = KafkaBus(kafka.bootstrap, client_id="voxwire-tests", options=FAST)
    yield bus
    await bus.close()


async def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def take(subscription: KafkaSubscription, count: int, timeout: float = 30.0) -> list[Record]:
    records: list[Record] = []
    async with asyncio.timeout(timeout):
        while len(records) < count:
            records.extend(await subscription.next_batch(count - len(records)))
    return records


async def test_round_trip_keeps_each_key_in_order_on_one_partition(
    kafka: Kafka, bus: KafkaBus
) -> None:
    topic = kafka.topic(partitions=3)
    keys = [f"sid-{i}" for i in range(6)]
    sent = [(key, f"{key}:{n}".encode()) for n in range(20) for key in keys]
    # all at once: the producer must keep the order of the calls per key
    await asyncio.gather(*(bus.produce(topic, key, value) for key, value in sent))
    subscription = bus.subscribe(topic, kafka.group())
    records = await take(subscription, len(sent))
    by_key: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_key[record.key].append(record)
    assert set(by_key) == set(keys)
    for key, got in by_key.items():
        assert [r.value for r in got] == [v for k, v in sent if k == key]
        assert len({r.partition for r in got}) == 1
        assert [r.offset for r in got] == sorted(r.offset for r in got)
    assert len({r.partition for r in records}) > 1  # six keys spread over partitions
    await asyncio.gather(*(subscription.commit(r) for r in records))


async def test_next_batch_returns_what_is_waiting_in_order(kafka: Kafka, bus: KafkaBus) -> None:
    topic = kafka.topic()
    for n in range(50):
        await bus.produce(topic, "sid", str(n).encode())
    subscription = bus.subscribe(topic, kafka.group())
    first = await take(subscription, 1)
    batch = await subscription.next_batch(100)
    rest = await take(subscription, 49 - len(batch))
    assert [int(r.value) for r in first + batch + rest] == list(range(50))


async def test_two_consumers_of_a_group_share_the_partitions(kafka: Kafka) -> None:
    topic, group = kafka.topic(partitions=4), kafka.group()
    one, two = (KafkaBus(kafka.bootstrap, options=FAST) for _ in range(2))
    try:
        a = one.subscribe(topic, group)
        await wait_until(lambda: len(a.assignment) == 4)
        b = two.subscribe(topic, group)
        await wait_until(lambda: bool(a.assignment) and bool(b.assignment))
        assert a.assignment | b.assignment == {0, 1, 2, 3}
        assert not a.assignment & b.assignment
        sent = {f"sid-{i}".encode() for i in range(40)}
        await asyncio.gather(*(one.produce(topic, v.decode(), v) for v in sent))
        got: dict[str, list[Record]] = {"a": [], "b": []}

        async def drain(name: str, subscription: KafkaSubscription) -> None:
            while True:
                got[name].extend(await subscription.next_batch(10))

        tasks = [asyncio.create_task(drain("a", a)), asyncio.create_task(drain("b", b))]
        await wait_until(lambda: len(got["a"]) + len(got["b"]) >= len(sent))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        values = [r.value for r in got["a"] + got["b"]]
        assert sorted(values) == sorted(sent)  # every record once
        assert got["a"] and got["b"]
        assert {r.partition for r in got["a"]} <= a.assignment
        assert {r.partition for r in got["b"]} <= b.assignment
    finally:
        await asyncio.gather(one.close(), two.close())


async def test_a_busy_consumer_still_gives_partitions_away(kafka: Kafka) -> None:
    """A worker whose engines are all busy does not call next(); the group must
    still rebalance at once (the consumer thread keeps polling)."""
    topic, group = kafka.topic(partitions=2), kafka.group()
    one, two = (KafkaBus(kafka.bootstrap, options=FAST) for _ in range(2))
    try:
        for n in range(10):
            await one.produce(topic, f"sid-{n}", b"job")
        busy = one.subscribe(topic, group)
        await take(busy, 1)  # ... and never asks again
        idle = two.subscribe(topic, group)
        started = time.monotonic()
        await wait_until(lambda: len(idle.assignment) == 1, timeout=15)
        assert time.monotonic() - started < 10
        assert len(busy.assignment) == 1
    finally:
        await asyncio.gather(one.close(), two.close())


async def test_a_partition_taken_away_while_paused_delivers_when_it_comes_back(
    kafka: Kafka,
) -> None:
    """A busy consumer holds what it fetched and pauses its partitions; one of
    them goes to another member and, once that member leaves, comes back. The
    consumer resumed the rest meanwhile: the returning partition must not stay
    paused (librdkafka 0.11 kept a partition's pause flag across
    re-assignment; this guards the version in use)."""
    topic, group = kafka.topic(partitions=2), kafka.group()
    one, two = (KafkaBus(kafka.bootstrap, options=FAST) for _ in range(2))
    try:
        busy = one.subscribe(topic, group)
        await wait_until(lambda: len(busy.assignment) == 2)
        for n in range(20):
            await one.produce(topic, f"sid-{n}", str(n).encode())
        got = await take(busy, 1)
        await asyncio.sleep(3 * FAST.consumer.keepalive_s)  # busy: the thread polls, holds, pauses
        other = two.subscribe(topic, group)
        await wait_until(lambda: len(other.assignment) == 1, timeout=20)
        moved = next(iter(other.assignment))
        kept = [r for r in got if r.partition != moved]
        while not (len(busy.assignment) == 1 and kept):  # drain what is left of ours
            kept += await take(busy, 1)
        await other.close()  # leaves the group: the partition comes back
        await wait_until(lambda: len(busy.assignment) == 2, timeout=20)
        records = got + kept
        async with asyncio.timeout(20):
            while not any(r.partition == moved for r in records):
                records += await busy.next_batch(20)
    finally:
        await asyncio.gather(one.close(), two.close())


async def test_a_later_commit_does_not_skip_an_earlier_record(kafka: Kafka) -> None:
    topic, group = kafka.topic(), kafka.group()
    for run in range(3):
        bus = KafkaBus(kafka.bootstrap, options=FAST)
        if run == 0:
            for n in range(5):
                await bus.produce(topic, "sid", str(n).encode())
        subscription = bus.subscribe(topic, group)
        records = await take(subscription, 3 if run < 2 else 2)
        if run == 0:
            # three jobs in flight; the later two finish first, the first never
            assert [r.offset for r in records] == [0, 1, 2]
            await subscription.commit(records[2])
            await subscription.commit(records[1])
        elif run == 1:
            assert [r.offset for r in records] == [0, 1, 2]  # nothing was skipped
            await asyncio.gather(*(subscription.commit(r) for r in reversed(records)))
        else:
            assert [r.offset for r in records] == [3, 4]
        await bus.close()


CRASHING_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from voxwire.bus.kafka import KafkaBus
    from voxwire.bus.kafka_options import ConsumerOptions, KafkaOptions

    async def main(bootstrap, topic, group):
        options = KafkaOptions(
            consumer=ConsumerOptions(session_timeout_ms=6000, heartbeat_interval_ms=2000)
        )
        bus = KafkaBus(bootstrap, options=options)
        subscription = bus.subscribe(topic, group)
        records = [await subscription.next() for _ in range(4)]
        await subscription.commit(records[0])  # done
        await subscription.commit(records[2])  # done, but records[1] still runs
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
    """
)


@pytest.mark.timeout(120)
async def test_uncommitted_records_are_redelivered_after_a_crash(
    kafka: Kafka, bus: KafkaBus
) -> None:
    topic, group = kafka.topic(), kafka.group()
    for n in range(6):
        await bus.produce(topic, "sid", str(n).encode())
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_WORKER, kafka.bootstrap, topic, group,
        cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), timeout=60)
        assert line.strip() == b"ready"
    finally:
        worker.send_signal(signal.SIGKILL)
        await worker.wait()
    # the group takes the partition back once the dead member's session expires
    subscription = bus.subscribe(topic, group)
    records = await take(subscription, 5, timeout=45)
    assert [r.offset for r in records] == [1, 2, 3, 4, 5]


@pytest.mark.serial
async def test_a_commit_the_broker_never_answers_fails_and_is_sent_again(kafka: Kafka) -> None:
    """A commit waits at most ``commit_timeout_s`` for the broker (its caller
    gets a BusError instead of hanging, here well before librdkafka's own 60 s
    request timeout); once the broker answers again the commit is sent again,
    so the group does not get the record a second time."""
    topic, group = kafka.topic(), kafka.group()
    options = replace(FAST, consumer=replace(FAST.consumer, commit_timeout_s=1.0))
    bus = KafkaBus(kafka.bootstrap, options=options)
    await bus.produce(topic, "sid", b"job")
    subscription = bus.subscribe(topic, group)
    [record] = await take(subscription, 1)
    with frozen(service_pid("kafka")), pytest.raises(BusError, match="no answer within 1 s"):
        async with asyncio.timeout(20):
            await subscription.commit(record)
    await bus.close()  # the last commit goes out on close

    again = KafkaBus(kafka.bootstrap, options=options)
    await again.produce(topic, "sid", b"next")
    later = again.subscribe(topic, group)
    [first] = await take(later, 1)
    assert first.value == b"next"
    await again.close()


@pytest.mark.serial
async def test_a_consumer_that_does_not_rejoin_is_replaced(
    kafka: Kafka, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer that lost its partitions (the broker did not answer for longer
    than the session) and has none back ``rejoin_s`` later is replaced by a new
    member of its group, which goes on from the committed position: the records
    behind it are neither lost nor delivered twice."""
    topic, group = kafka.topic(), kafka.group()
    options = replace(FAST, consumer=replace(FAST.consumer, rejoin_s=1.0))
    bus = KafkaBus(kafka.bootstrap, options=options)
    for n in range(3):
        await bus.produce(topic, "sid", str(n).encode())
    subscription = bus.subscribe(topic, group)
    await subscription.commit(*await take(subscription, 3))

    def replaced() -> bool:
        return any("a new consumer joins" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.INFO, logger="voxwire.bus.kafka_consumer"):
        with frozen(service_pid("kafka")):
            async with asyncio.timeout(30):
                while not replaced():
                    await asyncio.sleep(0.2)
        for n in range(3, 6):
            await bus.produce(topic, "sid", str(n).encode())
        later = await take(subscription, 3, timeout=45)
    assert [r.value for r in later] == [b"3", b"4", b"5"]
    assert subscription.assignment == frozenset({0})
    await bus.close()


async def test_a_cancelled_next_loses_nothing(kafka: Kafka, bus: KafkaBus) -> None:
    topic = kafka.topic()
    for n in range(40):
        await bus.produce(topic, "sid", str(n).encode())
    subscription = bus.subscribe(topic, kafka.group())
    got: list[int] = []
    rng = random.Random(7)
    async with asyncio.timeout(30):
        while len(got) < 40:
            try:
                batch = await asyncio.wait_for(subscription.next_batch(3), rng.uniform(0, 0.02))
            except TimeoutError:
                continue
            got.extend(int(r.value) for r in batch)
    assert got == list(range(40))


async def test_a_next_cancelled_as_its_records_arrive_loses_nothing(
    kafka: Kafka, bus: KafkaBus
) -> None:
    """A timeout that fires in the loop turn the records are handed over: the
    call is cancelled after its result is set and before it wakes."""
    topic = kafka.topic()
    for n in range(3):
        await bus.produce(topic, "sid", str(n).encode())
    subscription = bus.subscribe(topic, kafka.group())
    waiting: list[asyncio.Task[list[Record]]] = []
    hand_over = subscription._hand_over

    def hand_over_then_cancel(fetch: Any, records: list[Record]) -> None:
        hand_over(fetch, records)
        waiting[0].cancel()

    subscription._hand_over = hand_over_then_cancel  # type: ignore[method-assign]
    waiting.append(asyncio.create_task(subscription.next_batch(3)))
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]
    subscription._hand_over = hand_over  # type: ignore[method-assign]
    again = await take(subscription, 3)
    assert [r.value for r in again] == [b"0", b"1", b"2"]


async def test_a_consumer_thread_that_stops_going_round_is_stuck_until_it_does(
    kafka: Kafka,
) -> None:
    """Liveness: a call on the consumer thread that hangs (here its command
    intake, held until seen) makes the bus report the consumer stuck, by topic and
    group, once ``stall_s`` has passed; it is not once the thread goes round again."""
    options = KafkaOptions(consumer=ConsumerOptions(stall_s=3.0))
    bus = KafkaBus(kafka.bootstrap, options=options)
    topic, group = kafka.topic(), kafka.group()
    subscription = bus.subscribe(topic, group)
    try:
        await wait_until(lambda: subscription.assignment == frozenset({0}))
        await wait_until(lambda: bus.stuck() is None)  # going round its loop
        release = threading.Event()
        take_commands = subscription._take_commands

        def hanging() -> None:
            release.wait(30)
            subscription._take_commands = take_commands  # type: ignore[method-assign]
            take_commands()

        subscription._take_commands = hanging  # type: ignore[method-assign]
        await wait_until(lambda: bus.stuck() is not None, timeout=25)
        why = bus.stuck()
        assert why is not None and topic in why and group in why and "stuck for" in why
        release.set()
        await wait_until(lambda: bus.stuck() is None, timeout=10)
    finally:
        await bus.close()


async def test_a_consumer_that_gets_nothing_while_records_wait_is_replaced(
    kafka: Kafka, caplog: pytest.LogCaptureFixture
) -> None:
    """A fetcher that stops without an error (here its partition paused behind
    the subscription's back): records wait, none come; after ``idle_s``, once
    the statistics show the lag, a new consumer joins and delivers them."""
    options = KafkaOptions(
        consumer=ConsumerOptions(session_timeout_ms=6_000, heartbeat_interval_ms=2_000, idle_s=2.0)
    )
    bus = KafkaBus(kafka.bootstrap, options=options)
    topic = kafka.topic()
    subscription = bus.subscribe(topic, kafka.group())
    renewals = "voxwire_kafka_consumer_renewals_total"
    before = REGISTRY.get_sample_value(renewals, {"topic": topic, "reason": "idle"}) or 0.0
    try:
        await bus.produce(topic, "sid", b"0")
        first = await take(subscription, 1)
        assert [r.value for r in first] == [b"0"]
        await subscription.commit(*first)
        take_commands = subscription._take_commands

        def pause_then_go_on() -> None:  # once, on the consumer thread
            consumer = subscription._consumer
            consumer.pause(consumer.assignment())
            subscription._take_commands = take_commands  # type: ignore[method-assign]
            take_commands()

        subscription._take_commands = pause_then_go_on  # type: ignore[method-assign]
        await asyncio.sleep(1.0)
        for n in range(1, 4):
            await bus.produce(topic, "sid", str(n).encode())
        with caplog.at_level(logging.WARNING, logger="voxwire.bus.kafka_consumer"):
            later = await take(subscription, 3, timeout=45)
        assert [r.value for r in later] == [b"1", b"2", b"3"]
        after = REGISTRY.get_sample_value(renewals, {"topic": topic, "reason": "idle"})
        assert after == before + 1
        assert any("records wait, none came in 2 s" in r.getMessage() for r in caplog.records)
    finally:
        await bus.close()


async def test_producing_to_a_missing_topic_raises_bus_error(kafka: Kafka) -> None:
    options = replace(FAST, delivery_timeout_ms=1_500)
    bus = KafkaBus(kafka.bootstrap, options=options)
    topic = f"test.bus.missing.{uuid.uuid4().hex[:8]}"
    try:
        with pytest.raises(BusError) as caught:
            await bus.produce(topic, "sid-x", b"lost")
        assert topic in str(caught.value)
        assert "sid-x" in str(caught.value)
    finally:
        await bus.close()


async def test_closed_bus_and_subscription_refuse_work(kafka: Kafka) -> None:
    topic = kafka.topic()
    bus = KafkaBus(kafka.bootstrap, options=FAST)
    subscription = bus.subscribe(topic, kafka.group())
    await bus.close()
    with pytest.raises(BusError):
        await bus.produce(topic, "sid", b"x")
    with pytest.raises(BusError):
        await subscription.next()
    with pytest.raises(BusError):
        bus.subscribe(topic, "other")


def test_kafka_init_is_idempotent(kafka: Kafka) -> None:
    base = f"test.init.{uuid.uuid4().hex[:8]}"
    spec = [
        TopicSpec(name=f"{base}.jobs", partitions=3, retention_ms=3_600_000),
        TopicSpec(
            name=f"{base}.audio",
            partitions=2,
            retention_ms=60_000,
            max_message_bytes=1 << 20,
            cleanup_policy=CleanupPolicy.COMPACT_DELETE,
        ),
    ]
    names = [s.name for s in spec]
    kafka.topics.extend(names)
    assert kafka_init(kafka.bootstrap, spec) == names
    assert kafka_init(kafka.bootstrap, spec) == []
    # an existing topic is left alone even when the spec changed
    changed = [s.model_copy(update={"partitions": 6}) for s in spec]
    assert kafka_init(kafka.bootstrap, changed) == []
    metadata = kafka.admin.list_topics(timeout=10).topics
    assert [len(metadata[n].partitions) for n in names] == [3, 2]
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"{base}.audio")
    configs = kafka.admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["retention.ms"].value == "60000"
    assert configs["max.message.bytes"].value == str(1 << 20)
    assert configs["cleanup.policy"].value == "compact,delete"


def test_kafka_init_prefixes_a_namespace(kafka: Kafka) -> None:
    namespace = f"test-ns-{uuid.uuid4().hex[:8]}"
    spec = [TopicSpec(name="transcription.jobs", partitions=2)]
    kafka.topics.append(f"{namespace}.transcription.jobs")
    created = kafka_init(kafka.bootstrap, spec, namespace=namespace)
    assert created == [f"{namespace}.transcription.jobs"]
    assert kafka_init(kafka.bootstrap, spec, namespace=namespace) == []


def test_the_cli_creates_topics_with_the_partitions_asked_for(kafka: Kafka) -> None:
    """``voxwire kafka init --partitions`` (the Helm chart's hook Job passes its value)."""
    namespace = f"test_cli_{uuid.uuid4().hex[:8]}"
    names = [f"{namespace}.{spec.name}" for spec in DEFAULT_TOPICS]
    kafka.topics.extend(names)
    voxwire = Path(sys.executable).with_name("voxwire")
    env = {**os.environ, "VOXWIRE_KAFKA_BOOTSTRAP": kafka.bootstrap, "VOXWIRE_NAMESPACE": namespace}
    done = subprocess.run(
        [str(voxwire), "kafka", "init", "--partitions", "3", "--replication-factor", "1"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    metadata = kafka.admin.list_topics(timeout=10).topics
    assert {n: len(metadata[n].partitions) for n in names} == dict.fromkeys(names, 3)


def test_default_topics_and_overrides() -> None:
    names = {s.name: s for s in DEFAULT_TOPICS}
    assert names["transcription.jobs"].kafka_config() == {
        "cleanup.policy": "delete",
        "retention.ms": str(7 * 24 * 3_600_000),
    }
    assert names["transcription.audio"].kafka_config()["max.message.bytes"] == str(1 << 20)
    assert names["prompt.queries"].partitions == 6
    specs = {
        s.name: s
        for s in topic_specs(
            {"transcription.jobs": {"partitions": 24, "config": {"min.insync.replicas": "2"}}},
            replication_factor=3,
        )
    }
    assert specs["transcription.jobs"].partitions == 24
    assert specs["transcription.jobs"].kafka_config()["min.insync.replicas"] == "2"
    assert {s.replication_factor for s in specs.values()} == {3}
    with pytest.raises(ConfigError):
        topic_specs({"no.such.topic": {"partitions": 1}})
    with pytest.raises(ConfigError):
        topic_specs({"transcription.jobs": {"partitions": 0}})


# -- consumer lag (voxwire_kafka_consumer_lag, from librdkafka's statistics) --------------


def lag(topic: str, group: str) -> float | None:
    return REGISTRY.get_sample_value("voxwire_kafka_consumer_lag", {"topic": topic, "group": group})


async def test_the_lag_gauge_follows_what_the_group_committed(kafka: Kafka, bus: KafkaBus) -> None:
    topic, group = kafka.topic(partitions=2), kafka.group()
    for n in range(10):
        await bus.produce(topic, f"sid-{n % 2}", str(n).encode())
    subscription = bus.subscribe(topic, group)
    try:
        records = await take(subscription, 10)
        await subscription.commit(*records[:3])
        await wait_until(lambda: lag(topic, group) == 7)
        await subscription.commit(*records[3:])
        await wait_until(lambda: lag(topic, group) == 0)
    finally:
        await subscription.close()


def test_lag_counts_only_the_partitions_the_consumer_fetches() -> None:
    stats = {
        "topics": {
            "jobs": {
                "partitions": {
                    "0": {"fetch_state": "active", "consumer_lag": 4},
                    "1": {"fetch_state": "active", "consumer_lag": -1},  # not known yet
                    "2": {"fetch_state": "none", "consumer_lag": 9},  # another member's
                    "-1": {"fetch_state": "none", "consumer_lag": -1},
                }
            }
        }
    }
    assert consumer_lag(stats) == {"jobs": 4}


async def test_a_group_exists_once_a_consumer_joined_it(kafka: Kafka, bus: KafkaBus) -> None:
    topic, group = kafka.topic(), kafka.group()
    assert not await bus.has_group(group)  # no such group yet
    subscription = bus.subscribe(topic, group)
    waiting = asyncio.create_task(subscription.next())
    deadline = time.monotonic() + 30
    while not await bus.has_group(group):
        assert time.monotonic() < deadline, "the consumer never joined its group"
        await asyncio.sleep(0.2)
    waiting.cancel()
    await subscription.close()
