"""A telephony platform's media stream of a call, end to end: a real WebSocket
client speaks the protocol (connected, start, 20 ms mu-law media in real time
and faster, stop) and the call's session transcribes it; wrong keys and
malformed messages are refused with the reason."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest
import websockets

from evaluation.corpus import corpus_wer, joined_utterances, word_errors
from tests.helpers import SAME_WORDS_MARGIN, PlatformThread
from voxwire.audio.codecs import sample_chunks
from voxwire.audio.decoding import pcm16le_to_float32
from voxwire_client import AsyncClient, AudioEncoding

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]

TELEPHONE_MARGIN = 4  # words of 73 the telephone band may cost: tests/e2e/test_telephone_audio.py


def _url(platform: PlatformThread, key: str | None) -> str:
    base = platform.url.replace("http://", "ws://", 1)
    return f"{base}/v1/telephony/media-stream" + (f"?key={key}" if key else "")


def _start(call: str, parameters: dict[str, str] | None = None) -> str:
    start = {
        "accountSid": "AC0",
        "callSid": call,
        "streamSid": "MZ0",
        "tracks": ["inbound"],
        "customParameters": parameters or {},
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    }
    return json.dumps({"event": "start", "sequenceNumber": "1", "start": start, "streamSid": "MZ0"})


def _media(n: int, payload: bytes) -> str:
    media = {
        "track": "inbound",
        "chunk": str(n + 1),
        "timestamp": str(20 * n),
        "payload": base64.b64encode(payload).decode(),
    }
    return json.dumps({"event": "media", "sequenceNumber": str(n + 2), "media": media})


async def _session_exists(platform: PlatformThread, sid: str) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    async with httpx.AsyncClient() as http:
        for _ in range(100):
            response = await http.get(f"{platform.url}/v1/sessions/{sid}", headers=headers)
            if response.status_code == 200:
                return
            await asyncio.sleep(0.05)
    pytest.fail(f"no session {sid} after start")


async def test_a_call_streamed_as_a_telephony_platform_does_is_transcribed(
    platform: PlatformThread,
) -> None:
    pcm, _, refs = joined_utterances()
    frames = sample_chunks(pcm16le_to_float32(pcm), AudioEncoding.MULAW, 8_000, chunk_ms=20)
    call = "CA" + "5e" * 16
    async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
        async with websockets.connect(_url(platform, platform.api_key)) as ws:
            await ws.send(json.dumps({"event": "connected", "protocol": "Call"}))
            await ws.send(_start(call))
            await _session_exists(platform, f"call-{call}")
            following = asyncio.create_task(client.follow(f"call-{call}"))
            loop = asyncio.get_running_loop()
            begun = loop.time()
            for n, frame in enumerate(frames):  # three times real time
                await ws.send(_media(n, frame))
                await asyncio.sleep(max(0.0, begun + (n + 1) * 0.02 / 3 - loop.time()))
            await ws.send(json.dumps({"event": "stop", "sequenceNumber": "0", "stop": {}}))
        result = await asyncio.wait_for(following, 120)
    heard = [s.text for s in result.segments]
    print(f"media stream WER {corpus_wer(refs, heard):.3f}")
    assert len(heard) == len(refs), heard
    assert word_errors(refs, heard) <= TELEPHONE_MARGIN + SAME_WORDS_MARGIN + 2


async def test_a_wrong_key_is_refused_with_the_reason(platform: PlatformThread) -> None:
    async with websockets.connect(_url(platform, "not-a-key")) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "invalid API key" in closed.value.rcvd.reason


@pytest.mark.parametrize(
    ("message", "says"),
    [("hello", "not a media stream message"), (_media(0, b"\x00"), "media before start")],
)
async def test_a_malformed_message_is_refused_with_the_reason(
    platform: PlatformThread, message: str, says: str
) -> None:
    async with websockets.connect(_url(platform, platform.api_key)) as ws:
        await ws.send(message)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert says in closed.value.rcvd.reason


async def test_the_key_may_come_as_a_custom_parameter_of_the_stream(
    platform: PlatformThread,
) -> None:
    """As ``<Stream url="wss://.../v1/telephony/media-stream"><Parameter name="key" .../>``."""
    call = "CA" + "7a" * 16
    frames = [b"\xff" * 160] * 50  # a second of silence
    async with websockets.connect(_url(platform, None)) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call"}))
        await ws.send(_start(call, {"key": platform.api_key}))
        for n, frame in enumerate(frames):
            await ws.send(_media(n, frame))
        await _session_exists(platform, f"call-{call}")
        await ws.send(json.dumps({"event": "stop", "sequenceNumber": "0", "stop": {}}))
    async with websockets.connect(_url(platform, None)) as ws:
        await ws.send(_start("CA" + "7b" * 16, {"key": "not-a-key"}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "custom parameter key" in closed.value.rcvd.reason
