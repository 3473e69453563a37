"""A client's flush (``{"type": "flush"}`` on ``audio/<sid>/control``): the open
utterance's final now, without the pause that would end it, and the stream
goes on. Through the session core (scripted engine and VAD) and through a
stream worker on the in-memory bus, as a device or the Deepgram gateway sends it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.workers.stream.test_session import (
    CHUNK_MS,
    Clock,
    EnergyVad,
    ScriptedEngine,
    ScriptedVad,
    chunks,
    make_session,
    of_type,
    pcm,
    tone,
)
from tests.workers.stream.test_worker import OwnedBus, _results, _until, published
from voxwire.wire.records import StreamStart
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire.workers.engine import EngineOptions
from voxwire.workers.stream.worker import InvalidChunkError, StreamWorker, parse_control
from voxwire_client.api import PromptChange, StreamControl, StreamRequest
from voxwire_client.messages import Message

pytestmark = pytest.mark.timeout(60)


def test_a_flush_sends_the_open_utterance_s_final_now() -> None:
    clock, out = Clock(), []
    session = make_session(ScriptedEngine(), ScriptedVad([(1000, 9000, 0.95)]), clock, out)
    parts = chunks(tone(5.0))  # speech from 1 s to the end: no pause ever ends it
    for index, chunk in enumerate(parts[:30]):
        clock.t = (index + 1) * CHUNK_MS / 1000
        session.push(index, chunk, clock.t)
        session.run_pending()
    assert of_type(out, "final") == []  # the speaker has not paused
    session.flush(3.0)
    session.run_pending()
    (flushed,) = of_type(out, "final")
    assert flushed.segment.flushed and not flushed.segment.continues
    assert (flushed.segment.start_ms, flushed.segment.end_ms) == (824, 2976)
    assert flushed.segment.text == f"words of {2976 - 824} ms"
    for index, chunk in enumerate(parts[30:], start=30):  # the stream goes on
        clock.t = (index + 1) * CHUNK_MS / 1000
        session.push(index, chunk, clock.t)
        session.run_pending()
    session.end(clock.t)
    session.finish()
    first, second = of_type(out, "final")
    assert first == flushed and not second.segment.flushed
    assert second.segment.start_ms == 2976 and second.segment.end_ms == 5000
    (transcript,) = [m for m in out if m.type == "transcript"]
    assert [s.flushed for s in transcript.segments] == [True, False]  # type: ignore[attr-defined]


def test_a_flush_without_speech_sends_nothing() -> None:
    clock, out = Clock(), []
    session = make_session(ScriptedEngine(), ScriptedVad([]), clock, out)
    for index, chunk in enumerate(chunks(np.zeros(16_000, dtype=np.float32))):
        session.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    session.flush(1.0)
    session.run_pending()
    assert of_type(out, "final") == [] and of_type(out, "partial") == []


def test_control_messages_parse() -> None:
    assert parse_control(b'{"type": "flush"}', "s1") is StreamControl.FLUSH
    assert parse_control(b'{"type": "end"}', "s1") is StreamControl.END
    assert isinstance(parse_control(b'{"type": "prompts"}', "s1"), PromptChange)
    with pytest.raises(InvalidChunkError, match='"flush"'):
        parse_control(b'{"type": "flash"}', "s1")
    assert StreamControl.FLUSH.payload == b'{"type": "flush"}'


async def test_a_flush_on_the_control_topic_reaches_the_worker() -> None:
    """The final comes after the flush, before the end is even sent."""
    bus, out = OwnedBus(), []
    engine = ScriptedEngine(lambda a: "ask not what your country can do.")
    worker = StreamWorker(bus, engine, EngineOptions(), vad_factory=EnergyVad)
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_results(bus, out))]
    await _until(lambda: bus.audio is not None)
    start = StreamStart(sid="fl1", tenant_id="t1", request=StreamRequest())
    await bus.produce(AUDIO_TOPIC, "fl1", start.encode())
    data, size = pcm(np.concatenate([np.zeros(8000, np.float32), tone(2.0)])), CHUNK_MS * 32
    for n, i in enumerate(range(0, len(data), size)):
        await bus.produce(AUDIO_TOPIC, "fl1", published(f"audio/fl1/chunk/{n}", data[i : i + size]))
    await bus.produce(AUDIO_TOPIC, "fl1", published("audio/fl1/control", b'{"type": "flush"}'))
    await _until(lambda: any(m.type == "final" for m in out))
    finals: list[Message] = [m for m in out if m.type == "final"]
    assert [f.segment.flushed for f in finals] == [True]  # type: ignore[attr-defined]
    assert not any(m.type == "transcript" for m in out)  # the stream goes on
    await bus.produce(AUDIO_TOPIC, "fl1", published("audio/fl1/control", b'{"type": "end"}'))
    await _until(lambda: any(m.type == "transcript" for m in out))
    assert len([m for m in out if m.type == "final"]) == 1  # nothing was left to finalise
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
