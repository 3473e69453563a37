"""Re-transcriptions are the file worker's low-priority lane: one waits while live
work runs in the process, and one under way gives its engine to an upload that
arrives, then runs again from the start and completes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.models.conftest import jfk_audio
from voxwire.audio.decoding import float32_to_pcm16le
from voxwire.blobs import LocalBlobStore
from voxwire.bus.memory import MemoryBus
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC, REJOBS_TOPIC, RESULTS_TOPIC
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.files.worker import FileWorker
from voxwire_client.messages import Message, ProgressMessage, TranscriptMessage, parse_message

pytestmark = pytest.mark.timeout(300)


def _job(blobs: LocalBlobStore, sid: str, repeats: int, version: int) -> bytes:
    audio = np.concatenate([jfk_audio()] * repeats)
    key = blobs.key(sid, "audio.pcm")
    blobs.put(key, float32_to_pcm16le(audio))
    duration_ms = len(audio) * 1000 // 16_000
    job = FileJob(
        sid=sid,
        tenant_id="t",
        audio_key=key,
        duration_ms=duration_ms,
        model="tiny.en",
        version=version,
    )
    return job.encode()


async def _until(results: asyncio.Queue[Message], done: set[str]) -> list[Message]:
    """Messages until every session of ``done`` has published its transcript."""
    seen: list[Message] = []
    while done - {m.sid for m in seen if isinstance(m, TranscriptMessage)}:
        seen.append(await results.get())
    return seen


async def _collect(bus: MemoryBus, into: asyncio.Queue[Message]) -> None:
    subscription = bus.subscribe(RESULTS_TOPIC, "subscriber")
    while True:
        into.put_nowait(parse_message((await subscription.next()).value))


async def test_a_retranscription_waits_for_live_work_and_gives_way_to_an_upload(
    engine: Engine, tmp_path: Path
) -> None:
    bus, blobs = MemoryBus(), LocalBlobStore(tmp_path / "blobs")
    live = True
    worker = FileWorker(
        bus, blobs, [engine], EngineOptions(language="en", threads=2), busy=lambda: live
    )
    results: asyncio.Queue[Message] = asyncio.Queue()
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_collect(bus, results))]
    try:
        async with asyncio.timeout(240):
            await bus.produce(REJOBS_TOPIC, "s_again", _job(blobs, "s_again", 4, version=2))
            await bus.produce(JOBS_TOPIC, "s_first", _job(blobs, "s_first", 1, version=1))
            first = await _until(results, {"s_first"})
            assert {m.sid for m in first} == {"s_first"}  # live work ran: it waited

            live = False  # the streams ended: the re-transcription starts
            while not any(m.sid == "s_again" and m.type == "final" for m in first):
                first.append(await results.get())
            await bus.produce(JOBS_TOPIC, "s_upload", _job(blobs, "s_upload", 1, version=1))
            rest = await _until(results, {"s_upload", "s_again"})
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    transcripts = [m.sid for m in rest if isinstance(m, TranscriptMessage)]
    assert transcripts == ["s_upload", "s_again"]  # the upload did not wait for it
    again = [m for m in first + rest if m.sid == "s_again"]
    assert {m.version for m in again} == {2}
    # it ran again from the start: its first messages came twice, with the same seqs
    starts = [m.seq for m in again if isinstance(m, ProgressMessage) and m.processed_ms == 0]
    assert len(starts) == 2 and len(set(starts)) == 1
    (transcript,) = [m for m in again if isinstance(m, TranscriptMessage)]
    assert transcript.text.lower().count("country") >= 4
