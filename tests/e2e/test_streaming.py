"""Live streams over MQTT, end to end: a device publishes PCM chunks, the
platform answers with partials, finals and matches on the session topics."""

from __future__ import annotations

import itertools
import json

import httpx
import numpy as np
import pytest

from evaluation.corpus import (
    EVAL_DIR,
    UTTERANCES,
    corpus_wer,
    eval_items,
    joined_utterances,
    pcm16,
    word_errors,
)
from tests.helpers import SAME_WORDS_MARGIN, Listener, PlatformThread
from voxwire.audio.codecs import opus_packets
from voxwire.audio.decoding import decode, pcm16le_to_float32
from voxwire_client import ApiError, AudioCodec, Client, PromptSpec, StreamRequest, pcm_chunks
from voxwire_client.messages import ErrorMessage, Message, SegmentMessage

pytestmark = pytest.mark.timeout(300)


def test_one_final_per_utterance_with_partials_first(platform: PlatformThread) -> None:
    pcm, spans, refs = joined_utterances()
    events: list[Message] = []
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(pcm_chunks(pcm), StreamRequest(), speed=3, on_event=events.append)
    finals = [m for m in events if m.type == "final"]
    assert len(finals) == len(UTTERANCES), [m.segment.text for m in finals]  # type: ignore[union-attr]
    for final, (start, end) in zip(finals, spans, strict=True):
        segment = final.segment  # type: ignore[union-attr]
        assert start - 500 <= segment.start_ms and segment.end_ms <= end + 500, (
            segment,
            start,
            end,
        )
        assert final.latency is not None  # type: ignore[union-attr]
    partials = [m for m in events if m.type == "partial"]
    assert partials, "no partial for utterances longer than the partial interval"
    first_partial = min(m.seq for m in partials)
    assert first_partial < finals[-1].seq
    for partial in partials:  # a partial comes before the final that replaces it
        index = partial.segment.index  # type: ignore[union-attr]
        assert partial.seq < finals[index].seq
    assert [m.seq for m in events] == sorted({m.seq for m in events})
    offline = _offline_texts(platform)
    streamed = [f.segment.text for f in finals]  # type: ignore[union-attr]
    print(f"stream WER {corpus_wer(refs, streamed):.4f}, offline {corpus_wer(refs, offline):.4f}")
    assert word_errors(refs, streamed) <= word_errors(refs, offline) + SAME_WORDS_MARGIN
    assert result.text and len(result.segments) == len(UTTERANCES)


def test_an_opus_stream_transcribes_like_pcm_and_outlives_bad_packets(
    platform: PlatformThread,
) -> None:
    """The same speech as Opus packets at 24 kbit/s (a tenth of PCM's bytes):
    one final per utterance, WER next to the PCM stream's; a damaged packet
    and an empty one are reported and stood in for, and the stream goes on."""
    pcm, spans, refs = joined_utterances()
    packets = list(opus_packets(pcm16le_to_float32(pcm), bitrate=24_000, frame_ms=60))
    packets[40], packets[41] = b"\xff\x00not opus", b""  # in the pause after the first utterance
    events: list[Message] = []
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        opus = client.stream(
            packets,
            StreamRequest(codec=AudioCodec.OPUS, frame_ms=60),
            chunk_ms=60,
            speed=3,
            on_event=events.append,
        )
        linear = client.stream(pcm_chunks(pcm), StreamRequest(), speed=3)
    errors = [m for m in events if isinstance(m, ErrorMessage)]
    assert [(e.code, e.fatal) for e in errors] == [("bad_frame", False)] * 2, errors
    assert len(opus.segments) == len(UTTERANCES), [s.text for s in opus.segments]
    for segment, (start, end) in zip(opus.segments, spans, strict=True):
        assert start - 500 <= segment.start_ms and segment.end_ms <= end + 500
    heard = [s.text for s in opus.segments]
    linear_heard = [s.text for s in linear.segments]
    sent = sum(map(len, packets))
    opus_wer, pcm_wer = corpus_wer(refs, heard), corpus_wer(refs, linear_heard)
    print(f"{sent} bytes of Opus, {len(pcm)} of PCM; WER {opus_wer:.3f} vs {pcm_wer:.3f}")
    assert word_errors(refs, heard) <= word_errors(refs, linear_heard) + SAME_WORDS_MARGIN


def test_fast_endpointing_keeps_the_words_and_marks_what_continues(
    platform: PlatformThread,
) -> None:
    """The fast policy, asked for in the request's JSON as devices send it: the
    same words as the balanced default on the same speech, every utterance
    closed, and a final marked ``continues`` only right after the one it goes on."""
    pcm, spans, refs = joined_utterances()
    events: list[Message] = []
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        fast = client.stream(
            pcm_chunks(pcm),
            StreamRequest.model_validate({"endpointing": "fast"}),
            speed=3,
            on_event=events.append,
        )
        balanced = client.stream(pcm_chunks(pcm), StreamRequest(), speed=3)
    finals = [m.segment for m in events if isinstance(m, SegmentMessage) and m.type == "final"]
    assert [s.text for s in fast.segments] == [s.text for s in finals]
    for before, segment in itertools.pairwise(finals):
        if segment.continues:  # it begins where the final it goes on with ended
            assert segment.start_ms - before.end_ms < 600, (before, segment)
    utterances = [s for s in finals if not s.continues]
    assert len(utterances) >= len(UTTERANCES) - 1, [s.text for s in finals]
    shown = [(s.start_ms, s.end_ms, s.continues, s.text) for s in finals]
    for start, end in spans:  # each utterance is closed by a final of its own
        assert any(start < s.end_ms <= end + 500 for s in finals), (start, end, shown)
    heard, baseline = [s.text for s in finals], [s.text for s in balanced.segments]
    early = sum(1 for s in finals if s.continues)
    print(f"fast WER {corpus_wer(refs, heard):.3f}, balanced {corpus_wer(refs, baseline):.3f}")
    print(f"{len(finals)} finals, {early} continuing the one before")
    assert word_errors(refs, heard) <= word_errors(refs, baseline) + SAME_WORDS_MARGIN


def _offline_texts(platform: PlatformThread) -> list[str]:
    """The same utterances as file jobs."""
    items = {item.id: item for item in eval_items()}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        return [client.transcribe(items[name].path).text for name in UTTERANCES]


def test_silence_and_noise_give_no_text(platform: PlatformThread) -> None:
    rng = np.random.default_rng(7)
    silence = np.zeros(10 * 16000, dtype=np.float32)
    noise = (rng.standard_normal(10 * 16000) * 0.003).astype(np.float32)
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(pcm_chunks(pcm16(np.concatenate([silence, noise]))), speed=20)
    assert result.segments == () and result.text == ""


def test_malformed_chunks_get_errors_and_spare_other_sessions(platform: PlatformThread) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    created = httpx.post(f"{platform.url}/v1/streams", json={}, headers=headers).json()
    sid = created["sid"]
    device = Listener(platform.mqtt_port, platform.api_key, client_id=f"device-{sid}")
    assert device.connect() == 0
    device.subscribe(f"transcription/{sid}/+")
    topic = created["audio_topic"]
    # an odd byte count, a chunk far ahead of its turn, then the next in order
    for n, payload in ((0, b"\x00" * 3201), (1000, b"\x00" * 3200), (1, b"\x00" * 3200)):
        device.client.publish(f"{topic}/{n}", payload, qos=1).wait_for_publish(10)
    device.client.publish(created["control_topic"], b"not json", qos=1).wait_for_publish(10)
    device.client.publish(created["control_topic"], b'{"type": "end"}', qos=1).wait_for_publish(10)
    got = device.wait_for(
        lambda g: any(json.loads(m.payload).get("status") == "completed" for m in g), 60
    )
    device.close()
    codes = {json.loads(m.payload).get("code") for m in got}
    assert {"audio", "chunk_order", "invalid_chunk"} <= codes, codes
    # another stream at the same time is unaffected
    items = {item.id: item for item in eval_items()}
    samples = decode(items["lhotse_lj_LJ002-0020"].path.read_bytes()).samples
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(pcm_chunks(pcm16(samples)), speed=8)
    assert "middle" in result.text.lower() or len(result.segments) == 1


def test_unknown_session_and_foreign_topics_are_refused(platform: PlatformThread) -> None:
    device = Listener(platform.mqtt_port, platform.api_key, client_id="device-stranger")
    assert device.connect() == 0
    info = device.client.publish("audio/s_0000000000000000/chunk/0", b"\x00" * 3200, qos=1)
    info.wait_for_publish(10)
    device.close()
    assert httpx.get(f"{platform.url}/healthz").json()["status"] == "ok"
    assert (EVAL_DIR / "audio").exists()


def test_reference_device_client(platform: PlatformThread) -> None:
    """examples/device_stream.py, plain paho as firmware would use, works as documented."""
    import subprocess
    import sys
    from pathlib import Path
    from urllib.parse import urlsplit

    example = Path(__file__).resolve().parents[2] / "examples" / "device_stream.py"
    broker = urlsplit(platform.mqtt_url)
    result = subprocess.run(
        [
            sys.executable,
            str(example),
            str(EVAL_DIR / "audio" / "pocketsphinx_librivox_0880.wav"),
            "--url",
            platform.url,
            "--broker",
            str(broker.hostname),
            "--port",
            str(broker.port),
            "--key",
            platform.api_key,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "young man" in result.stdout.lower(), result.stdout


def test_standing_prompts_changed_while_streaming(platform: PlatformThread) -> None:
    """Prompts added over HTTP after the first final match from a later final on,
    once each, right after the final that completes them; a removed prompt
    matches no more; a bad change is an error that leaves the stream running."""
    pcm, _, _ = joined_utterances()
    events: list[Message] = []
    start = StreamRequest(
        prompts=(PromptSpec(id="year", text="1813"), PromptSpec(id="sorrow", text="great sorrow"))
    )
    auth = {"Authorization": f"Bearer {platform.api_key}"}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:

        def on_event(message: Message) -> None:
            events.append(message)
            if message.type == "final" and message.segment.index == 0:  # type: ignore[union-attr]
                # from another thread of the app (the client's loop runs this callback)
                url = f"{platform.url}/v1/sessions/{message.sid}/prompts"
                add = [
                    {"id": "apostle", "text": "apostle of the middle classes"},
                    {"id": "thoughts", "text": "that thing, a thousand thoughts", "within": 6},
                ]
                change = {"add": add, "remove": ["sorrow"]}
                assert httpx.post(url, json=change, headers=auth).status_code == 202
                twice = httpx.post(url, json={"add": [add[0], add[0]]}, headers=auth)
                assert twice.status_code == 400 and "unique" in twice.json()["message"]

        result = client.stream(pcm_chunks(pcm), start, speed=3, on_event=on_event)
        with pytest.raises(ApiError) as ended:
            client.change_prompts(result.sid, remove=["year"])
        assert ended.value.status == 409
    finals = [m for m in events if m.type == "final"]
    matches = [m for m in events if m.type == "match"]
    assert sorted(m.prompt_id for m in matches) == ["apostle", "thoughts", "year"]  # type: ignore[attr-defined]
    for match in matches:  # right after the final that completed it
        (final,) = [f for f in finals if f.segment.id == match.segment_ids[-1]]  # type: ignore[attr-defined]
        assert final.seq < match.seq
        assert not [f for f in finals if final.seq < f.seq < match.seq]
    assert not [m for m in events if m.type == "error"]


@pytest.mark.parametrize(
    "prompts", [[{"id": "a", "text": "..."}], [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]]
)
def test_a_stream_with_unusable_prompts_is_refused_at_start(
    platform: PlatformThread, prompts: list[dict[str, str]]
) -> None:
    response = httpx.post(
        f"{platform.url}/v1/streams",
        headers={"Authorization": f"Bearer {platform.api_key}"},
        json={"prompts": prompts},
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_request"
