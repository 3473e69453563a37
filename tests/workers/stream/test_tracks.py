"""A live stream with separate channels: interleaved chunks split per channel,
each channel endpointed and decoded on its own, finals labelled, echoes dropped.

The session runs with its own scheduler, a scripted engine (it tells the two
parties apart by their level, the engine is not under test) and a scripted VAD
per channel, so that exact timing is known."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tests.workers.stream.test_session import Clock, ScriptedEngine, ScriptedVad
from voxwire.audio.decoding import SAMPLE_RATE, Audio
from voxwire.core.errors import AudioError
from voxwire.workers.engine import EngineOptions
from voxwire.workers.stream.checkpoints import StreamCheckpoint
from voxwire.workers.stream.config import StreamConfig, stream_config
from voxwire.workers.stream.scheduler import Scheduler
from voxwire.workers.stream.session import Resume, StreamSession
from voxwire.workers.stream.tracks import TrackDecoders
from voxwire_client.api import AudioEncoding, StreamRequest
from voxwire_client.messages import Message, SegmentMessage, TranscriptMessage

pytestmark = pytest.mark.timeout(60)

CHUNK_MS = 100
LABELS = ("agent", "customer")


def tone(seconds: float, level: float) -> Audio:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def place(length_s: float, *parts: tuple[float, Audio]) -> Audio:
    """Silence of ``length_s`` with each ``(at_s, audio)`` part in it."""
    out = np.zeros(int(length_s * SAMPLE_RATE), dtype=np.float32)
    for at_s, audio in parts:
        start = int(at_s * SAMPLE_RATE)
        out[start : start + audio.size] += audio
    return out


def interleaved(*channels: Audio) -> list[bytes]:
    """The channels as PCM16LE stereo chunks of :data:`CHUNK_MS`."""
    pcm = (np.stack(channels, axis=1) * 32767).astype("<i2")
    step = SAMPLE_RATE * CHUNK_MS // 1000
    return [pcm[n : n + step].tobytes() for n in range(0, len(pcm), step)]


def by_level(audio: Audio) -> str:
    """The agent speaks at 0.3, the customer at 0.6; an echo is far quieter."""
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    return "thank you for calling" if peak < 0.45 else "i want to cancel my order"


def run(
    chunks: list[bytes],
    vads: list[ScriptedVad],
    *,
    text: Callable[[Audio], str] = by_level,
    labels: tuple[str, ...] = LABELS,
) -> list[Message]:
    clock = Clock()
    config = StreamConfig(labels=labels)
    others = iter(vads[1:])
    session = StreamSession(
        "s1", EngineOptions(), config, (), vad=vads[0], vad_factory=lambda: next(others), now=clock
    )
    scheduler = Scheduler(ScriptedEngine(text), now=clock)
    sent: list[Message] = []
    for n, chunk in enumerate(chunks):
        clock.t += CHUNK_MS / 1000
        session.push(n, chunk, clock.t)
        sent += [m for out in scheduler.run_pending(session) for m in out.messages]
    session.end(clock.t)
    sent += [m for out in scheduler.finish(session) for m in out.messages]
    return sent


def finals(sent: list[Message]) -> list[tuple[int | None, str | None, str]]:
    return [
        (m.segment.channel, m.segment.speaker, m.segment.text)
        for m in sent
        if isinstance(m, SegmentMessage) and m.type == "final"
    ]


def test_a_request_for_separate_channels_interleaves_two_by_default() -> None:
    request = StreamRequest(channels="separate", encoding="mulaw")
    assert request.audio_channels == 2
    assert stream_config(request).labels == ("ch1", "ch2")
    labelled = StreamRequest(channels="separate", channel_labels=("a", "b", "c"))
    assert stream_config(labelled).channels == 3
    assert stream_config(StreamRequest()).channels == 1
    with pytest.raises(ValueError, match="opus stream is one channel"):
        StreamRequest(channels="separate", encoding="opus")


def test_each_channel_of_a_chunk_is_decoded_on_its_own() -> None:
    left, right = tone(0.1, 0.3), tone(0.1, 0.6)
    (chunk,) = interleaved(left, right)
    tracks = TrackDecoders(2, AudioEncoding.PCM16, 16_000)
    first, second = tracks.decoder(0), tracks.decoder(1)
    np.testing.assert_allclose(first.decode(chunk), left, atol=1e-3)
    np.testing.assert_allclose(second.decode(chunk), right, atol=1e-3)
    with pytest.raises(AudioError, match="whole frames"):
        first.decode(chunk[:-2])
    with pytest.raises(AudioError, match="whole frames"):
        second.decode(chunk[:-2])


def test_each_channel_has_its_own_finals_labelled_and_the_transcript_in_time_order() -> None:
    agent = place(6.0, (0.5, tone(1.2, 0.3)), (3.5, tone(1.0, 0.3)))
    customer = place(6.0, (2.0, tone(1.0, 0.6)))
    vads = [ScriptedVad([(500, 1700, 0.9), (3500, 4500, 0.9)]), ScriptedVad([(2000, 3000, 0.9)])]
    sent = run(interleaved(agent, customer), vads)
    assert finals(sent) == [
        (1, "agent", "thank you for calling"),
        (2, "customer", "i want to cancel my order"),
        (1, "agent", "thank you for calling"),
    ]
    seqs = [m.seq for m in sent]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    (transcript,) = [m for m in sent if isinstance(m, TranscriptMessage)]
    assert [s.speaker for s in transcript.segments] == ["agent", "customer", "agent"]
    assert [s.start_ms for s in transcript.segments] == sorted(
        s.start_ms for s in transcript.segments
    )


def test_overlapping_finals_are_ordered_by_time_in_the_transcript() -> None:
    """The customer starts first and talks longer: the agent's final comes out first."""
    agent = place(6.0, (1.5, tone(0.8, 0.3)))
    customer = place(6.0, (0.5, tone(3.0, 0.6)))
    vads = [ScriptedVad([(1500, 2300, 0.9)]), ScriptedVad([(500, 3500, 0.9)])]
    sent = run(interleaved(agent, customer), vads)
    assert [f[1] for f in finals(sent)] == ["agent", "customer"]  # as decided
    (transcript,) = [m for m in sent if isinstance(m, TranscriptMessage)]
    assert [s.speaker for s in transcript.segments] == ["customer", "agent"]  # as said
    assert transcript.text.startswith("i want to cancel")


def test_an_echo_of_the_other_channel_is_dropped_and_crosstalk_kept() -> None:
    """The agent's words come back on the customer's channel 20 dB down and
    120 ms late; the engine reads the same words there. The echo is dropped;
    the same words at the same level on both channels are both kept."""
    words = place(5.0, (1.0, tone(1.5, 0.3)))
    echo = np.roll(words, int(0.12 * SAMPLE_RATE)) * 0.1
    same = lambda audio: "thank you for calling"  # noqa: E731
    vads = [ScriptedVad([(1000, 2500, 0.9)]), ScriptedVad([(1120, 2620, 0.9)])]
    sent = run(interleaved(words, echo), vads, text=same)
    assert finals(sent) == [(1, "agent", "thank you for calling")]
    vads = [ScriptedVad([(1000, 2500, 0.9)]), ScriptedVad([(1120, 2620, 0.9)])]
    both = np.roll(words, int(0.12 * SAMPLE_RATE))
    sent = run(interleaved(words, both), vads, text=same)
    assert [f[1] for f in finals(sent)] == ["agent", "customer"]


def test_a_mono_stream_has_no_channel_on_its_finals() -> None:
    clock = Clock()
    session = StreamSession("s1", EngineOptions(), StreamConfig(), (), vad=ScriptedVad(
        [(500, 1500, 0.9)]), now=clock)  # fmt: skip
    scheduler = Scheduler(ScriptedEngine(by_level), now=clock)
    pcm = (place(3.0, (0.5, tone(1.0, 0.3))) * 32767).astype("<i2").tobytes()
    session.push(0, pcm, 0.0)
    session.end(0.0)
    sent = [m for out in scheduler.finish(session) for m in out.messages]
    assert finals(sent) == [(None, None, "thank you for calling")]
    assert session.resume_point().tracks == ()


def test_a_resumed_stereo_stream_does_not_decide_a_channels_finals_again() -> None:
    """Resumed at the agent's settled point, with the customer's further on: the
    customer's final before its own point is not sent again."""
    agent = place(6.0, (3.5, tone(1.0, 0.3)))
    customer = place(6.0, (0.5, tone(1.0, 0.6)))
    resume = Resume(10, chunk=0, stream_sample=0, tracks=(0, 2 * SAMPLE_RATE))
    clock = Clock()
    vads = iter([ScriptedVad([(500, 1500, 0.9)])])
    session = StreamSession(
        "s1", EngineOptions(), StreamConfig(labels=LABELS), (),
        vad=ScriptedVad([(3500, 4500, 0.9)]), vad_factory=lambda: next(vads), now=clock,
        resume=resume,
    )  # fmt: skip
    scheduler = Scheduler(ScriptedEngine(by_level), now=clock)
    for n, chunk in enumerate(interleaved(agent, customer)):
        session.push(n, chunk, 0.0)
    session.end(0.0)
    sent = [m for out in scheduler.finish(session) for m in out.messages]
    assert finals(sent) == [(1, "agent", "thank you for calling")]
    checkpoint = StreamCheckpoint(b"{}", session.resume_point())
    assert StreamCheckpoint.decode(checkpoint.encode()).resume.tracks == (
        6 * SAMPLE_RATE,
        6 * SAMPLE_RATE,
    )
