"""The stream worker over a bus: checkpoints before messages, held records, and
a session that moves to another worker (faked ownership; the real takeover
runs on Kafka in tests/distributed_mode/test_stream_takeover.py)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
import pytest

from tests.workers.stream.test_session import CHUNK_MS, EnergyVad, ScriptedEngine, bursts, pcm
from voxwire.bus import MemoryBus, Record, Subscription
from voxwire.core.errors import BusError
from voxwire.wire.records import ClientPublish, PromptUpdate, StreamStart
from voxwire.wire.topics import AUDIO_TOPIC, RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import TextWindow, windows_of
from voxwire.workers.engine import EngineOptions
from voxwire.workers.stream.checkpoints import MemoryCheckpoints
from voxwire.workers.stream.worker import StreamWorker
from voxwire_client.api import PromptChange, PromptSpec, RedactMode, StreamRequest
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentMessage,
    TranscriptMessage,
    parse_message,
)

pytestmark = pytest.mark.timeout(60)


def published(topic: str, payload: bytes) -> bytes:
    """The record the bridge puts on the bus for a client's publish."""
    return ClientPublish(topic=topic, payload=payload).encode()


@dataclass
class Owned:
    """A subscription whose ownership of every partition the test switches off."""

    inner: Subscription
    owned: bool = True

    async def next(self) -> Record:
        return await self.inner.next()

    async def next_batch(self, max_records: int) -> list[Record]:
        return await self.inner.next_batch(max_records)

    async def commit(self, *records: Record) -> None:
        await self.inner.commit(*records)

    def owns(self, partition: int) -> bool:
        return self.owned

    async def close(self) -> None:
        await self.inner.close()


class OwnedBus(MemoryBus):
    def __init__(self) -> None:
        super().__init__()
        self.audio: Owned | None = None

    def subscribe(self, topic: str, group: str) -> Subscription:
        subscription = super().subscribe(topic, group)
        if topic != AUDIO_TOPIC:
            return subscription
        self.audio = Owned(subscription)
        return self.audio


async def _results(bus: MemoryBus, into: list[Message]) -> None:
    subscription = bus.subscribe(RESULTS_TOPIC, "test")
    while True:
        for record in await subscription.next_batch(100):
            into.append(parse_message(record.value))


async def _until(predicate: object, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_checkpoints_precede_messages_and_a_moved_session_goes_quiet() -> None:
    bus, checkpoints, out = OwnedBus(), MemoryCheckpoints(), []
    worker = StreamWorker(
        bus, ScriptedEngine(), EngineOptions(), checkpoints=checkpoints, vad_factory=EnergyVad
    )
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="mv1", tenant_id="t1", request=StreamRequest(partial_interval_s=1.0))
    await bus.produce(AUDIO_TOPIC, "mv1", start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    half = len(parts) // 2
    for n, part in enumerate(parts[:half]):
        await bus.produce(AUDIO_TOPIC, "mv1", published(f"audio/mv1/chunk/{n}", part))
    await _until(lambda: any(isinstance(m, SegmentMessage) and m.type == "final" for m in out))
    await asyncio.sleep(0.3)
    saved = await checkpoints.load("mv1")
    assert saved is not None and saved.last == out[-1]  # saved before it was sent
    assert saved.resume.next_seq == out[-1].seq + 1 and not saved.done

    assert bus.audio is not None
    bus.audio.owned = False  # a rebalance gave the partition to another worker
    sent = len(out)
    for n, part in enumerate(parts[half:], start=half):
        await bus.produce(AUDIO_TOPIC, "mv1", published(f"audio/mv1/chunk/{n}", part))
    await bus.produce(AUDIO_TOPIC, "mv1", published("audio/mv1/control", b'{"type": "end"}'))
    await asyncio.sleep(1.0)
    after = await checkpoints.load("mv1")
    assert len(out) == sent and after is not None and not after.done
    assert after.resume.next_seq == saved.resume.next_seq  # left for the new owner
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert all(m.sid == "mv1" for m in out)


class BrokenResults(MemoryBus):
    """The results topic refuses every record (Kafka down past the delivery timeout)."""

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if topic == RESULTS_TOPIC:
            raise BusError("results refused")
        await super().produce(topic, key, value)


async def test_a_worker_that_cannot_deliver_ends_and_leaves_its_sessions_to_resume() -> None:
    bus, checkpoints = BrokenResults(), MemoryCheckpoints()
    worker = StreamWorker(
        bus, ScriptedEngine(), EngineOptions(), checkpoints=checkpoints, vad_factory=EnergyVad
    )
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.05)
    start = StreamStart(sid="br1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "br1", start.encode())
    with pytest.raises(BusError, match="results refused") as caught:
        await asyncio.wait_for(running, 10)
    assert caught.value.sid == "br1"  # the session's error
    saved = await checkpoints.load("br1")
    assert saved is not None and not saved.done  # left for another worker, not closed


async def test_a_device_changes_prompts_on_the_control_topic() -> None:
    """{"type": "prompts"} on audio/<sid>/control, as a device publishes it: the
    new prompt matches the next finals; a malformed change is an error message
    and the stream goes on; the checkpoint keeps the prompts for a successor."""
    bus, checkpoints, out = OwnedBus(), MemoryCheckpoints(), []
    engine = ScriptedEngine(lambda a: "the budget and the hiring plan")
    worker = StreamWorker(
        bus, engine, EngineOptions(), checkpoints=checkpoints, vad_factory=EnergyVad
    )
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="pc1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "pc1", start.encode())
    change = b'{"type": "prompts", "add": [{"id": "plan", "text": "hiring plan"}]}'
    await bus.produce(AUDIO_TOPIC, "pc1", published("audio/pc1/control", change))
    await bus.produce(
        AUDIO_TOPIC, "pc1", published("audio/pc1/control", b'{"type": "prompts", "add": 7}')
    )
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        await bus.produce(AUDIO_TOPIC, "pc1", published(f"audio/pc1/chunk/{n}", data[i : i + size]))
    await bus.produce(AUDIO_TOPIC, "pc1", published("audio/pc1/control", b'{"type": "end"}'))
    await _until(lambda: any(m.type == "transcript" for m in out))
    matches = [m for m in out if m.type == "match"]
    finals = [m for m in out if m.type == "final"]
    assert len(matches) == len(finals) == 3
    (error,) = [m for m in out if m.type == "error"]
    assert "unusable prompt change" in error.message and not error.fatal  # type: ignore[attr-defined]
    saved = await checkpoints.load("pc1")
    assert saved is not None and saved.resume.prompts is not None
    assert [p.id for p in saved.resume.prompts] == ["plan"]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_each_final_sends_the_windows_it_changed() -> None:
    bus, out = OwnedBus(), []
    worker = StreamWorker(bus, ScriptedEngine(), EngineOptions(), vad_factory=EnergyVad)
    windows = bus.subscribe(WINDOWS_TOPIC, "test")
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="win1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "win1", start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        await bus.produce(
            AUDIO_TOPIC, "win1", published(f"audio/win1/chunk/{n}", data[i : i + size])
        )
    await bus.produce(AUDIO_TOPIC, "win1", published("audio/win1/control", b'{"type": "end"}'))
    await _until(lambda: any(isinstance(m, TranscriptMessage) for m in out))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    (transcript,) = [m for m in out if isinstance(m, TranscriptMessage)]
    expected = windows_of(transcript.segments, "win1")
    assert len(transcript.segments) >= 2 and expected
    latest = {}
    for record in await windows.next_batch(1000):
        window = TextWindow.model_validate_json(record.value)
        assert record.key == "win1"
        latest[window.index] = window
    assert list(latest.values()) == expected


async def test_a_redacting_stream_sends_no_card_number() -> None:
    bus, out = OwnedBus(), []
    engine = ScriptedEngine(lambda a: "my card is 4111 1111 1111 1111")
    worker = StreamWorker(bus, engine, EngineOptions(), vad_factory=EnergyVad)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    request = StreamRequest(redact=RedactMode.MASK)
    start = StreamStart(sid="rd1", tenant_id="t1", request=request)
    await bus.produce(AUDIO_TOPIC, "rd1", start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        chunk = published(f"audio/rd1/chunk/{n}", data[i : i + size])
        await bus.produce(AUDIO_TOPIC, "rd1", chunk)
    await bus.produce(AUDIO_TOPIC, "rd1", published("audio/rd1/control", b'{"type": "end"}'))
    await _until(lambda: any(isinstance(m, TranscriptMessage) for m in out))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    texts = [m.segment.text for m in out if isinstance(m, SegmentMessage)]
    assert texts and all(t == "my card is **** **** **** ****" for t in texts), texts


async def test_an_end_that_waited_for_missing_chunks_ends_the_stream_without_them() -> None:
    """Chunks 0 and 1, then 5 (2-4 never come), then the end: the end waits
    ``end_wait_s`` for the gap, then the stream completes with every chunk
    that came (5 too) and the client learns which chunks it lacks."""
    bus, out = OwnedBus(), []
    engine = ScriptedEngine(lambda a: "the quarterly budget")
    worker = StreamWorker(bus, engine, EngineOptions(), vad_factory=EnergyVad, end_wait_s=0.5)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="gap1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "gap1", start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    for n in (0, 1, 5):
        await bus.produce(AUDIO_TOPIC, "gap1", published(f"audio/gap1/chunk/{n}", parts[n]))
    await bus.produce(AUDIO_TOPIC, "gap1", published("audio/gap1/control", b'{"type": "end"}'))

    def completed() -> bool:
        return any(isinstance(m, ProgressMessage) and m.status == "completed" for m in out)

    await _until(completed, timeout=10)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = [m for m in out if isinstance(m, ErrorMessage)]
    assert [(e.code, e.fatal) for e in errors] == [("chunk_order", False)], errors
    assert "chunks 2 to 4 never arrived" in errors[0].message
    transcript = next(m for m in out if isinstance(m, TranscriptMessage))
    assert transcript.duration_ms == 3 * CHUNK_MS  # chunks 0, 1 and 5


async def test_garbage_on_the_audio_topic_leaves_a_neighbouring_stream_unaffected() -> None:
    """Malformed records, foreign topics, hostile keys, bad control messages and
    odd-length audio for another session: the worker goes on, the other session
    gets a clear error, and the neighbour's transcript comes out whole."""
    bus, out = OwnedBus(), []
    engine = ScriptedEngine(lambda a: "the quarterly budget")
    worker = StreamWorker(bus, engine, EngineOptions(), vad_factory=EnergyVad)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    for sid in ("ok1", "bad1"):
        start = StreamStart(sid=sid, tenant_id="t1", request=StreamRequest())
        await bus.produce(AUDIO_TOPIC, sid, start.encode())
    garbage = [
        ("bad1", b"\x00\xff not json"),
        ("bad1", b'{"topic": "audio/bad1/chunk/0"}'),
        ("bad1", b'{"topic": "audio/bad1/chunk/0", "payload": "***"}'),
        ("bad1", b"[1, 2, 3]"),
        ("a/+/#", published("audio/a/+/#/chunk/0", b"\x00\x00")),
        ("ok1", published("audio/bad1/chunk/0", b"\x00\x00")),  # another session's topic
        ("bad1", published("audio/bad1/chunk/0", b"\x00")),  # odd length: not PCM16
        ("bad1", published("audio/bad1/control", b"{not json")),
        ("bad1", published("audio/bad1/control", b'{"type": "prompts", "add": 7}')),
        ("ok1", published("stream/ok1/start", b"{}")),  # a start not from the gateway
    ]
    data = pcm(bursts())
    size = CHUNK_MS * 32
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    for n, chunk in enumerate(chunks):
        await bus.produce(AUDIO_TOPIC, "ok1", published(f"audio/ok1/chunk/{n}", chunk))
        key, value = garbage[n % len(garbage)]
        await bus.produce(AUDIO_TOPIC, key, value)
    await bus.produce(AUDIO_TOPIC, "ok1", published("audio/ok1/control", b'{"type": "end"}'))
    await _until(lambda: any(isinstance(m, TranscriptMessage) and m.sid == "ok1" for m in out))
    assert not any(t.done() for t in tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    finals = [m for m in out if isinstance(m, SegmentMessage) and m.sid == "ok1"]
    assert [m.type for m in finals].count("final") == 3
    assert not any(m.type == "error" for m in out if m.sid == "ok1")
    errors = [m for m in out if m.type == "error" and m.sid == "bad1"]
    assert errors and all(not m.fatal for m in errors)  # type: ignore[attr-defined]
    assert worker.ignored >= 2


class SlowEngine(ScriptedEngine):
    """Takes real time per call, as a real engine does."""

    def transcribe(self, audio, options, on_segment=None, abort=None):  # type: ignore[no-untyped-def]
        time.sleep(0.03)
        return super().transcribe(audio, options, on_segment, abort)


async def _flood_and_calm(worker: StreamWorker, bus: OwnedBus, out: list[Message]) -> list[str]:
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    size = CHUNK_MS * 32
    for sid, repeats in (("flood", 6), ("calm", 1)):
        start = StreamStart(sid=sid, tenant_id="t1", request=StreamRequest(partial_interval_s=0))
        await bus.produce(AUDIO_TOPIC, sid, start.encode())
        data = pcm(np.concatenate([bursts()] * repeats))
        for n, i in enumerate(range(0, len(data), size)):
            await bus.produce(
                AUDIO_TOPIC, sid, published(f"audio/{sid}/chunk/{n}", data[i : i + size])
            )
        await bus.produce(AUDIO_TOPIC, sid, published(f"audio/{sid}/control", b'{"type": "end"}'))
    await _until(lambda: sum(isinstance(m, TranscriptMessage) for m in out) == 2, timeout=60)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [m.sid for m in out if isinstance(m, SegmentMessage) and m.type == "final"]


async def test_a_session_sending_faster_than_real_time_takes_turns_with_the_others() -> None:
    """A client that sends minutes of audio at once queues many finals; a session
    that starts after it still gets its finals between them, not after them all."""
    bus, out = OwnedBus(), []
    worker = StreamWorker(bus, SlowEngine(), EngineOptions(), vad_factory=EnergyVad)
    order = await _flood_and_calm(worker, bus, out)
    assert order.count("flood") == 18 and order.count("calm") == 3
    last_calm = max(i for i, sid in enumerate(order) if sid == "calm")
    assert order[last_calm + 1 :].count("flood") >= 6, order


@pytest.mark.timeout(300)
async def test_finals_of_several_sessions_share_one_engine_call() -> None:
    """With an engine that batches (faster-whisper), finals waiting in several
    sessions go through one call; each session still gets its own text."""
    from evaluation.corpus import corpus_wer, joined_utterances
    from voxwire.workers.engines import create_engine

    engine = create_engine("faster-whisper", "tiny.en")
    bus, out = MemoryBus(), []
    worker = StreamWorker(bus, engine, EngineOptions(), batch_finals=8)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await asyncio.sleep(0.05)
    data, _spans, refs = joined_utterances()
    size = CHUNK_MS * 32
    sids = [f"bt{i}" for i in range(4)]
    for sid in sids:  # every session sends all its audio at once: finals pile up
        start = StreamStart(sid=sid, tenant_id="t1", request=StreamRequest(partial_interval_s=0))
        await bus.produce(AUDIO_TOPIC, sid, start.encode())
    for n, at in enumerate(range(0, len(data), size)):
        for sid in sids:
            await bus.produce(
                AUDIO_TOPIC, sid, published(f"audio/{sid}/chunk/{n}", data[at : at + size])
            )
    for sid in sids:
        await bus.produce(AUDIO_TOPIC, sid, published(f"audio/{sid}/control", b'{"type": "end"}'))
    await _until(lambda: sum(isinstance(m, TranscriptMessage) for m in out) == len(sids), 240)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    engine.close()
    assert worker.batches and max(worker.batches) > 1, worker.batches
    for sid in sids:
        finals = [
            m for m in out if isinstance(m, SegmentMessage) and m.sid == sid and m.type == "final"
        ]
        assert len(finals) == len(refs), [f.segment.text for f in finals]
        assert corpus_wer(refs, [f.segment.text for f in finals]) <= 0.1


class SlowResults(MemoryBus):
    """Sending a result takes a while (a busy Kafka): prompt changes come while
    a session's results wait in its outbox."""

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if topic == RESULTS_TOPIC:
            await asyncio.sleep(0.05)
        await super().produce(topic, key, value)


async def test_prompt_changes_while_results_are_being_sent_do_not_stall_the_stream() -> None:
    bus, out = SlowResults(), []
    worker = StreamWorker(
        bus, ScriptedEngine(lambda a: "the budget"), EngineOptions(), vad_factory=EnergyVad
    )
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await asyncio.sleep(0.05)
    start = StreamStart(sid="pl1", tenant_id="t1", request=StreamRequest(partial_interval_s=0.2))
    await bus.produce(AUDIO_TOPIC, "pl1", start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        await bus.produce(AUDIO_TOPIC, "pl1", published(f"audio/pl1/chunk/{n}", data[i : i + size]))
        change = f'{{"type": "prompts", "add": [{{"id": "p{n}", "text": "budget"}}]}}'
        await bus.produce(AUDIO_TOPIC, "pl1", published("audio/pl1/control", change.encode()))
        await asyncio.sleep(0.01)  # while the engine thread is sending
    await bus.produce(AUDIO_TOPIC, "pl1", published("audio/pl1/control", b'{"type": "end"}'))
    await _until(lambda: any(m.type == "transcript" for m in out), timeout=30)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert [m for m in out if m.type == "match"], "the prompts were applied"


async def test_the_gateway_changes_prompts_with_a_prompt_update_record() -> None:
    """A change through the HTTP API arrives as a typed record, applied as is."""
    bus, out = OwnedBus(), []
    engine = ScriptedEngine(lambda a: "the budget and the hiring plan")
    worker = StreamWorker(bus, engine, EngineOptions(), vad_factory=EnergyVad)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="pu1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "pu1", start.encode())
    change = PromptChange(add=(PromptSpec(id="plan", text="hiring plan"),))
    await bus.produce(AUDIO_TOPIC, "pu1", PromptUpdate(sid="pu1", change=change).encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        await bus.produce(AUDIO_TOPIC, "pu1", published(f"audio/pu1/chunk/{n}", data[i : i + size]))
    await bus.produce(AUDIO_TOPIC, "pu1", published("audio/pu1/control", b'{"type": "end"}'))
    await _until(lambda: any(m.type == "transcript" for m in out))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    matches = [m for m in out if isinstance(m, MatchMessage)]
    assert [m.prompt_id for m in matches] == ["plan"] * 3
    assert [m.seq for m in out] == list(range(out[0].seq, out[0].seq + len(out)))


async def test_a_stream_past_the_limit_is_refused_and_the_others_go_on() -> None:
    """``max_streams``: the stream one over the limit gets a fatal
    ``too_many_streams`` error with a hint; the streams already held keep going."""
    bus, out = MemoryBus(), []
    worker = StreamWorker(
        bus, ScriptedEngine(), EngineOptions(), vad_factory=EnergyVad, max_streams=1
    )
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    for sid in ("held", "over"):
        start = StreamStart(sid=sid, tenant_id="t1", request=StreamRequest())
        await bus.produce(AUDIO_TOPIC, sid, start.encode())
    data = pcm(bursts())
    size = CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        for sid in ("held", "over"):
            chunk = published(f"audio/{sid}/chunk/{n}", data[i : i + size])
            await bus.produce(AUDIO_TOPIC, sid, chunk)
    for sid in ("held", "over"):
        await bus.produce(AUDIO_TOPIC, sid, published(f"audio/{sid}/control", b'{"type":"end"}'))
    await _until(lambda: any(isinstance(m, TranscriptMessage) and m.sid == "held" for m in out))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    refused = [m for m in out if m.sid == "over"]
    assert [(m.type, getattr(m, "code", None), getattr(m, "fatal", None)) for m in refused] == [
        ("error", "too_many_streams", True)
    ]
    assert refused[0].hint and "max_streams" in refused[0].hint  # type: ignore[union-attr]
    held = [m for m in out if m.sid == "held" and isinstance(m, SegmentMessage)]
    assert len([m for m in held if m.type == "final"]) == 3
