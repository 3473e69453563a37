"""Device keys on the real broker of each mode (the embedded broker; Mosquitto's
dynamic security in distributed mode): a device key opens a stream over MQTT,
streams, and reads its transcript; a second device key of the same tenant gets
nothing of that session (topics, transcript over HTTP and MQTT) and cannot
search; the tenant's own key still reads it; a revoked device key is refused."""

from __future__ import annotations

import json
import secrets
import time

import httpx
import pytest

from evaluation.corpus import pcm16
from tests.e2e.test_mqtt_sessions import Device
from tests.helpers import Listener, PlatformThread
from tests.models.conftest import jfk_audio
from voxwire_client import StreamRequest
from voxwire_client.api import GetTranscript, OpenStream, SearchQuery
from voxwire_client.messages import is_terminal, parse_message
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]

_RUN = secrets.token_hex(3)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_device_key_reaches_only_the_sessions_it_opened(platform: PlatformThread) -> None:
    one_key = platform.new_device_key(f"mic-one-{_RUN}")
    one = Device(platform, one_key, f"mic-one-{_RUN}")
    two_key = platform.new_device_key(f"mic-two-{_RUN}")
    two = Device(platform, two_key, f"mic-two-{_RUN}")
    try:
        answer = one.ask(f"open-{_RUN}", OpenStream(op="open_stream", stream=StreamRequest()))
        assert answer.error is None and answer.stream is not None, answer
        sid = answer.stream.sid
        assert one.mqtt.subscribe(session_filter(sid)) == [1]
        granted = two.mqtt.subscribe(session_filter(sid))
        if isinstance(platform, PlatformThread):
            assert granted == [0x80]  # Mosquitto grants, and delivers nothing the ACL denies

        # the other device cannot end it (were it let through, nothing would be transcribed)
        two.publish(answer.stream.control_topic, json.dumps({"type": "end"}).encode())
        audio = pcm16(jfk_audio())
        for n, start in enumerate(range(0, len(audio), 3200)):  # 100 ms chunks
            one.mqtt.client.publish(f"{answer.stream.audio_topic}/{n}", audio[start : start + 3200])
        one.publish(answer.stream.control_topic, json.dumps({"type": "end"}).encode())
        one.mqtt.wait_for(
            lambda got: any(
                m.topic.startswith("transcription/") and is_terminal(parse_message(m.payload))
                for m in got
            ),
            timeout=180,
        )
        time.sleep(1)
        assert [m.topic for m in two.mqtt.snapshot() if m.topic.startswith("transcription/")] == []

        read = one.ask(f"read-{_RUN}", GetTranscript(op="transcript", sid=sid))
        assert read.transcript is not None, read
        assert "what your country can do" in read.transcript.text.lower(), read.transcript.text
        peek = two.ask(f"peek-{_RUN}", GetTranscript(op="transcript", sid=sid))
        assert peek.transcript is None and peek.error is not None
        assert peek.error.code == "not_found"
        searched = two.ask(f"search-{_RUN}", SearchQuery(q="country"))
        assert searched.page is None and searched.error is not None
        assert searched.error.code == "forbidden" and "device key" in searched.error.message

        transcript = f"{platform.url}/v1/sessions/{sid}/transcript"
        mine = httpx.get(transcript, headers=_bearer(one_key), timeout=30)
        assert mine.status_code == 200 and "country" in mine.json()["text"].lower()
        assert httpx.get(transcript, headers=_bearer(platform.api_key), timeout=30).is_success
        assert httpx.get(transcript, headers=_bearer(two_key), timeout=30).status_code == 404
        search = httpx.post(
            f"{platform.url}/v1/search", json={"q": "country"}, headers=_bearer(two_key)
        )
        assert search.status_code == 403 and "device key" in search.json()["message"]
    finally:
        one.mqtt.close()
        two.mqtt.close()

    platform.revoke_key(two.key_id)
    assert (
        httpx.post(f"{platform.url}/v1/streams", json={}, headers=_bearer(two_key)).status_code
        == 401
    )
    revoked = Listener(platform.mqtt_port, two_key, client_id=f"mic-two-again-{_RUN}")
    assert revoked.connect() not in (None, 0)
    revoked.close()
