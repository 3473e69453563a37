"""Fair engine time in the file worker, through the real bus: one tenant's backlog
does not hold back another tenant's upload, on the in-process bus and on Kafka,
where a worker that stops with backlogs of both tenants in hand loses none of
their jobs and the worker that takes its partitions over stays fair.

The engine is a stand-in that takes a fixed time per job and notes which job it
ran: the thing under test is which job runs when, not transcription."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from prometheus_client import REGISTRY

from tests.bus.test_kafka_bus import BOOTSTRAP, FAST, Kafka
from voxwire.audio.decoding import Audio, float32_to_pcm16le
from voxwire.blobs import LocalBlobStore
from voxwire.bus import Bus
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.memory import MemoryBus
from voxwire.bus.namespaced import NamespacedBus
from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init, topic_specs
from voxwire.wire.pools import REJOBS_SUFFIX
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC
from voxwire.workers.engine import EngineOptions, Segment, SegmentCallback, TranscriptionAborted
from voxwire.workers.files.worker import FileWorker

pytestmark = pytest.mark.timeout(240)

JOBS = "voxwire_jobs_waiting"


class PacedEngine:
    """Takes ``seconds`` per job and notes, in order, the sessions it ran."""

    name = "paced"

    def __init__(
        self,
        seconds: float,
        ran: list[str],
        sessions: dict[int, str],
        start_when: Callable[[], bool] = lambda: True,
    ) -> None:
        """``start_when``: the first job waits (up to 30 s) until it holds."""
        self.seconds = seconds
        self.ran = ran
        self.sessions = sessions
        self.start_when = start_when
        self._lock = threading.Lock()

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        waited = time.monotonic() + 30
        while not self.start_when() and time.monotonic() < waited:
            time.sleep(0.01)
        self.start_when = lambda: True
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            if abort is not None and abort():
                raise TranscriptionAborted("stopping")
            time.sleep(0.01)
        with self._lock:
            self.ran.append(self.sessions[len(audio)])
        return []

    def close(self) -> None:
        pass


class Jobs:
    """File jobs of tenants, each with a short silence of its own length (which
    tells the stand-in engine whose it is); the cost a job declares is what
    fairness weighs: ``duration_ms``."""

    def __init__(self, tmp_path: Path) -> None:
        self.blobs = LocalBlobStore(tmp_path / "blobs")
        self.sessions: dict[int, str] = {}

    def job(self, tenant: str, sid: str, seconds: int = 30) -> bytes:
        samples = 1600 + len(self.sessions)
        self.sessions[samples] = sid
        key = self.blobs.key(sid, "audio.pcm")
        self.blobs.put(key, float32_to_pcm16le(np.zeros(samples, dtype=np.float32)))
        return FileJob(
            sid=sid, tenant_id=tenant, audio_key=key, duration_ms=seconds * 1000, model="tiny.en"
        ).encode()

    async def submit(self, bus: Bus, tenant: str, count: int) -> list[str]:
        sids = [f"{tenant}-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(count)]
        for sid in sids:
            await bus.produce(JOBS_TOPIC, sid, self.job(tenant, sid))
        return sids


async def _until(condition: Callable[[], bool], timeout: float = 120) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def _tenant(sid: str) -> str:
    return sid.split("-", 1)[0]


async def test_an_upload_waits_for_the_job_in_service_not_for_another_tenants_backlog(
    tmp_path: Path,
) -> None:
    bus, jobs, ran = MemoryBus(), Jobs(tmp_path), []
    engine = PacedEngine(0.1, ran, jobs.sessions)
    worker = FileWorker(bus, jobs.blobs, [engine], EngineOptions(language="en"))
    running = asyncio.create_task(worker.run())
    try:
        backlog = await jobs.submit(bus, "a", 30)
        await _until(lambda: len(ran) >= 2)
        (upload,) = await jobs.submit(bus, "b", 1)
        await _until(lambda: upload in ran)
        at = ran.index(upload)  # after the job running when it came, and maybe the next
        assert at <= 3, f"b's upload ran {at + 1}th: {ran}"
        await _until(lambda: len(ran) == 31)
        assert sorted(ran) == sorted([*backlog, upload])  # nothing lost, nothing twice
        assert [s for s in ran if s != upload] == backlog  # a's own order kept
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


@pytest.fixture
def kafka() -> Kafka:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    try:
        admin.list_topics(timeout=5)
    except KafkaException as exc:
        reason = f"Kafka is not reachable at {BOOTSTRAP} ({exc}); scripts/services.sh start kafka"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return Kafka(BOOTSTRAP, admin)


async def test_on_kafka_a_stopped_worker_loses_no_backlog_and_its_successor_stays_fair(
    kafka: Kafka, tmp_path: Path
) -> None:
    """Worker one reads both tenants' backlogs ahead (a's queued first on every
    partition), runs a few jobs and stops; worker two takes every partition over:
    each job is run, and b's are not left until a's backlog is done."""
    namespace = f"fair{uuid.uuid4().hex[:8]}"
    specs = topic_specs({JOBS_TOPIC: {"partitions": 4}}, base=DEFAULT_TOPICS)
    kafka_init(kafka.bootstrap, specs, namespace=namespace)
    kafka.topics.extend(f"{namespace}.{spec.name}" for spec in specs)
    kafka.groups.extend(f"{namespace}.workers{suffix}" for suffix in ("", REJOBS_SUFFIX))
    jobs, ran_one, ran_two = Jobs(tmp_path), [], []
    buses = [NamespacedBus(KafkaBus(kafka.bootstrap, options=FAST), namespace + ".") for _ in "12"]

    def read_ahead() -> bool:
        """Worker two holds every job worker one did not run (on a loaded machine
        Kafka hands the partitions over a fetch at a time; fairness is over what
        a worker has read)."""
        waiting = sum(REGISTRY.get_sample_value(JOBS, {"tenant": t}) or 0 for t in "ab")
        return waiting >= 40 - len(ran_one) - 1

    one, two = (
        FileWorker(bus, jobs.blobs, [PacedEngine(0.15, ran, jobs.sessions, start)],
                   EngineOptions(), group="workers", drain_s=0)
        for bus, ran, start in zip(buses, (ran_one, ran_two), (lambda: True, read_ahead),
                                   strict=True)
    )  # fmt: skip
    tasks = [asyncio.create_task(one.run())]
    try:
        backlog_a = await jobs.submit(buses[0], "a", 30)
        backlog_b = await jobs.submit(buses[0], "b", 10)
        await _until(lambda: len(ran_one) >= 3)
        tasks[0].cancel()  # it stops with both backlogs read ahead, uncommitted
        await asyncio.gather(tasks[0], return_exceptions=True)
        tasks.append(asyncio.create_task(two.run()))
        await _until(lambda: set(backlog_a + backlog_b) <= set(ran_one + ran_two), timeout=150)
        b_left = [sid for sid in backlog_b if sid not in ran_one]
        last_b = max(ran_two.index(sid) for sid in b_left)
        # in bus order b's jobs would come after a's 30; shared, turn about with a's
        assert last_b <= 2 * len(b_left) + 3, ran_two
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(bus.close() for bus in buses))
