"""The file worker when the bus refuses a job's messages (Kafka away for longer
than the producer's delivery timeout): the job runs again until they are all
delivered, and the jobs behind it in its partition complete and are committed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.models.conftest import jfk_audio
from voxwire.audio.decoding import float32_to_pcm16le
from voxwire.blobs import LocalBlobStore
from voxwire.bus.memory import MemoryBus
from voxwire.core.errors import BusError
from voxwire.wire.records import FIRST_WORKER_SEQ, FileJob
from voxwire.wire.topics import JOBS_TOPIC, RESULTS_TOPIC
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.files.worker import FileWorker
from voxwire_client.messages import TranscriptMessage, is_terminal, parse_message

pytestmark = pytest.mark.timeout(300)


class RefusingBus(MemoryBus):
    """The in-process bus, refusing the first ``refusals`` results as Kafka does
    once its delivery timeout has passed."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if topic == RESULTS_TOPIC and self.refusals > 0:
            self.refusals -= 1
            raise BusError("Local: Message timed out")
        await super().produce(topic, key, value)


async def test_a_job_whose_messages_the_bus_refused_runs_again_and_the_next_completes(
    engine: Engine, tmp_path: Path
) -> None:
    bus = RefusingBus(refusals=3)
    blobs = LocalBlobStore(tmp_path / "blobs")
    audio = jfk_audio()
    for sid in ("s_refused", "s_behind"):
        key = blobs.key(sid, "audio.pcm")
        blobs.put(key, float32_to_pcm16le(audio))
        duration_ms = len(audio) * 1000 // 16000
        job = FileJob(
            sid=sid, tenant_id="t", audio_key=key, duration_ms=duration_ms, model="tiny.en"
        )
        await bus.produce(JOBS_TOPIC, "same-partition", job.model_dump_json().encode())
    results = bus.subscribe(RESULTS_TOPIC, "subscriber")
    worker = FileWorker(bus, blobs, [engine], EngineOptions(language="en", threads=2))
    running = asyncio.create_task(worker.run())
    transcripts: dict[str, TranscriptMessage] = {}
    seqs: dict[str, set[int]] = {"s_refused": set(), "s_behind": set()}
    ends: dict[str, int] = {}

    def complete(sid: str) -> bool:
        """Every message up to the session's last reached the subscriber."""
        return sid in ends and seqs[sid] >= set(range(FIRST_WORKER_SEQ, ends[sid] + 1))

    try:
        async with asyncio.timeout(240):
            while not all(complete(sid) for sid in seqs):
                message = parse_message((await results.next()).value)
                seqs[message.sid].add(message.seq)
                if isinstance(message, TranscriptMessage):
                    transcripts[message.sid] = message
                if is_terminal(message):
                    ends[message.sid] = message.seq
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert bus.refusals == 0
    assert ends["s_refused"] == ends["s_behind"]  # the same messages, the same seqs
    assert all("country" in t.text.lower() for t in transcripts.values()), transcripts
    assert worker.jobs_done == 2  # both committed: the refused job held nothing back
