"""PoolCheck: a served model is never refused while its workers live; a model
never served is refused at once. Against a real Kafka (see tests/bus)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer

from tests.bus.test_kafka_bus import Kafka, bus, kafka, kafka_bootstrap  # noqa: F401 (fixtures)
from voxwire.bus.kafka import KafkaBus
from voxwire.core.config import Settings
from voxwire.core.errors import BusError
from voxwire.sessions.pools import NoWorkerError, PoolCheck
from voxwire.wire.pools import Lane, Pool

pytestmark = pytest.mark.timeout(60)


class _Answers:
    """A bus whose has_group answers from a list (True, False or a BusError)."""

    def __init__(self, *answers: bool | BusError) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def has_group(self, group: str) -> bool:
        self.asked += 1
        await asyncio.sleep(0.01)
        answer = self.answers.pop(0)
        if isinstance(answer, BusError):
            raise answer
        return answer


def _check(answers: object, now: list[float], **kwargs: float) -> PoolCheck:
    return PoolCheck(answers, Settings(), clock=lambda: now[0], **kwargs)  # type: ignore[arg-type]


async def test_a_model_never_served_is_refused_at_the_first_no() -> None:
    check = _check(_Answers(False), [0.0])
    with pytest.raises(NoWorkerError, match="live streams"):
        await check.require("tiny.en", Lane.STREAMS)


async def test_a_served_group_is_refused_only_once_the_no_has_lasted_the_grace() -> None:
    now = [0.0]
    check = _check(_Answers(True, False, BusError("slow"), False, False, False), now, grace_s=30)
    await check.require("tiny.en", Lane.STREAMS)  # served
    for now[0] in (10.0, 20.0, 30.0):  # no, cannot say, no: still taken
        await check.require("tiny.en", Lane.STREAMS)
    now[0] = 40.0  # no for 30 s on end
    with pytest.raises(NoWorkerError):
        await check.require("tiny.en", Lane.STREAMS)
    with pytest.raises(NoWorkerError):  # forgotten: refused at once from now on
        await check.require("tiny.en", Lane.STREAMS)


async def test_a_yes_in_between_starts_the_grace_again() -> None:
    now = [0.0]
    check = _check(_Answers(True, False, True, False), now, grace_s=30)
    for now[0] in (0.0, 10.0, 35.0, 60.0):
        await check.require("tiny.en", Lane.FILES)


async def test_requests_that_arrive_together_share_one_question() -> None:
    answers = _Answers(True)
    check = _check(answers, [0.0])
    await asyncio.gather(*(check.require("tiny.en", Lane.FILES) for _ in range(20)))
    assert answers.asked == 1


class _Members:
    """Consumers of one group that join and leave in turn (a rebalance each time),
    polled by a thread of their own as a worker would."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        self._config: dict[str, str | int] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
        }
        if protocol == "classic":
            self._config |= {"session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000}
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def join_one(self) -> None:
        self._members = [self._consumer()]
        deadline = time.monotonic() + 20
        while not self._members[0].assignment():
            assert time.monotonic() < deadline, "the consumer never joined its group"
            self._members[0].poll(0.1)

    def churn(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _consumer(self) -> Consumer:
        consumer = Consumer(self._config)
        consumer.subscribe([self._topic])
        return consumer

    def _run(self) -> None:
        turn = time.monotonic()
        while not self._stop.is_set():
            for consumer in self._members:
                consumer.poll(0.02)
            if time.monotonic() >= turn:  # one joins; the oldest leaves once two are in
                turn = time.monotonic() + 0.5
                self._members.append(self._consumer())
                if len(self._members) > 2:
                    self._members.pop(0).close()
        for consumer in self._members:
            consumer.close()


# the consumer protocol (KIP-848) has states this client names UNKNOWN
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_group_that_rebalances_while_requests_arrive_is_never_refused(
    kafka: Kafka,  # noqa: F811
    bus: KafkaBus,  # noqa: F811
    protocol: str,
) -> None:
    settings = Settings()
    model = settings.engine.model
    # the pool's group, made this test's own by a prefix
    prefix = kafka.group() + "."
    group = prefix + Pool(model, model).group(Lane.STREAMS)
    kafka.groups.append(group)

    class Prefixed:
        async def has_group(self, name: str) -> bool:
            return await bus.has_group(prefix + name)

    # no cache and no grace: each request asks Kafka, and only its answer counts
    check = PoolCheck(Prefixed(), settings, ttl_s=0, grace_s=0)  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(NoWorkerError):  # never served: refused at once
        await check.require(model, Lane.STREAMS)
    assert time.monotonic() - started < 5

    members = _Members(kafka.bootstrap, kafka.topic(partitions=3), group, protocol)
    await asyncio.to_thread(members.join_one)
    members.churn()
    try:
        asked, deadline = 0, time.monotonic() + 8
        while time.monotonic() < deadline:
            await asyncio.gather(*(check.require(model, Lane.STREAMS) for _ in range(5)))
            asked += 1
            await asyncio.sleep(0.02)
    finally:
        await asyncio.to_thread(members.stop)
    assert asked > 20
