"""End to end on the embedded platform: real broker, real model, real HTTP."""

from __future__ import annotations

import json
import time

import httpx
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from evaluation.corpus import EVAL_DIR, corpus_wer, eval_with_text
from tests.helpers import Listener, PlatformThread, iter_json
from voxwire_client import Client
from voxwire_client._mqtt import mqtt_username, parse_broker_url, stable_client_id
from voxwire_client.messages import parse_message
from voxwire_client.topics import session_filter

pytestmark = pytest.mark.timeout(600)


def _upload(
    platform: PlatformThread, path: str, prompts: list[str] | None = None
) -> httpx.Response:
    with open(path, "rb") as fh:
        return httpx.post(
            f"{platform.url}/v1/sessions",
            headers={"Authorization": f"Bearer {platform.api_key}"},
            files={"file": (path.rsplit("/", 1)[-1], fh)},
            data={"prompts": json.dumps(prompts or [])},
            timeout=60,
        )


def _terminal(got: list) -> bool:
    return any(
        (m["type"] == "progress" and m["status"] in ("completed", "failed")) or m["type"] == "error"
        for m in iter_json(got)
    )


def test_eval_corpus_over_mqtt(platform: PlatformThread) -> None:
    """Every eval file with a reference: an outside subscriber sees valid, ordered
    messages, progress reaching 100 and a transcript; corpus WER <= 0.06."""
    refs, hyps = [], []
    for i, item in enumerate(eval_with_text()):
        response = _upload(platform, str(item.path))
        assert response.status_code == 201, response.text
        sid = response.json()["sid"]
        listener = Listener(platform.mqtt_port, platform.api_key, client_id=f"eval-{i}")
        assert listener.connect() == 0
        assert listener.subscribe(session_filter(sid)) == [1]
        got = listener.wait_for(_terminal)
        listener.close()

        messages = [parse_message(r.payload) for r in got]  # schema-valid or raises
        assert all(m.sid == sid for m in messages)
        live = [m.seq for m, r in zip(messages, got, strict=True) if not r.retain]
        assert live == sorted(set(live)), f"{item.id}: live seq not strictly increasing: {live}"
        assert live == list(range(live[0], live[-1] + 1)), f"{item.id}: gap in {live}"
        progress = [m for m in messages if m.type == "progress"]
        assert progress[-1].percent == 100 and progress[-1].status == "completed"
        transcripts = [m for m in messages if m.type == "transcript"]
        assert len(transcripts) == 1
        assert transcripts[0].duration_ms == pytest.approx(item.duration_s * 1000, abs=60)
        refs.append(item.text)
        hyps.append(transcripts[0].text)
    wer = corpus_wer(refs, hyps)
    print(f"corpus WER over {len(refs)} files: {wer:.4f}")
    assert wer <= 0.06


def test_progress_is_published_while_transcribing(platform: PlatformThread) -> None:
    """A long file reports intermediate progress, not only 0 and 100."""
    response = _upload(platform, str(EVAL_DIR / "audio" / "mfa_acoustic_corpus.wav"))
    sid = response.json()["sid"]
    listener = Listener(platform.mqtt_port, platform.api_key, client_id="progress")
    listener.connect()
    listener.subscribe(session_filter(sid))
    got = listener.wait_for(_terminal)
    listener.close()
    percents = [m["percent"] for m in iter_json(got) if m["type"] == "progress"]
    assert any(0 < p < 100 for p in percents), percents
    assert percents == sorted(percents)
    finals = [m for m in iter_json(got) if m["type"] == "final"]
    assert len(finals) >= 2


def test_prompt_matches_with_time_span(platform: PlatformThread) -> None:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.transcribe(
            EVAL_DIR / "audio" / "whisper_jfk.flac", prompts=["ask not", "purple elephants"]
        )
    assert [m.prompt for m in result.matches] == ["ask not"]
    match = result.matches[0]
    # "ask not" is spoken at about 3.0-4.3 s of the recording.
    assert 2000 <= match.start_ms <= 4500, match
    assert match.start_ms < match.end_ms <= 6000, match
    assert "<em>" in match.highlight and match.score >= 0.8


def test_sdk_survives_a_dropped_connection(platform: PlatformThread) -> None:
    """Drop the SDK's MQTT socket after the first segment: the transcript is still
    complete, in order, without duplicates."""
    dropped = []

    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:

        def on_event(message) -> None:  # type: ignore[no-untyped-def]
            if message.type == "final" and not dropped:
                client._async.subscriptions[message.sid].drop_connection()
                dropped.append(message.seq)

        result = client.transcribe(EVAL_DIR / "audio" / "mfa_cold_corpus.wav", on_event=on_event)
        server = client.transcript(result.sid)
    assert dropped, "the connection was never dropped"
    indexes = [s.index for s in result.segments]
    assert indexes == list(range(len(server.segments)))
    assert [s.text for s in result.segments] == [s.text for s in server.segments]
    assert result.text == server.text and len(result.segments) >= 2


def test_redaction_is_chosen_per_upload(platform: PlatformThread) -> None:
    jfk = str(EVAL_DIR / "audio" / "whisper_jfk.flac")
    with open(jfk, "rb") as fh:
        response = httpx.post(
            f"{platform.url}/v1/sessions",
            headers={"Authorization": f"Bearer {platform.api_key}"},
            files={"file": ("jfk.flac", fh)},
            data={"redact": "everything"},
            timeout=60,
        )
    assert response.status_code == 400, response.text
    assert "invalid redact" in response.json()["message"]
    assert "off, mask, entity" in response.json()["hint"]
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        transcript = client.transcribe(jfk, redact="entity")
    assert "fellow americans" in transcript.text.lower()  # nothing personal in it


def _session_present(platform: PlatformThread, client_id: str, *, expiry_s: int) -> bool:
    """Connect as ``client_id`` without a clean start: does the broker still hold a
    session for it? (The probe leaves one behind when ``expiry_s`` > 0.)"""
    address = parse_broker_url(platform.mqtt_url)
    v5 = not isinstance(platform, PlatformThread)  # the embedded broker speaks 3.1.1
    probe = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=paho.MQTTv5 if v5 else paho.MQTTv311,
        clean_session=None if v5 else False,
    )
    probe.username_pw_set(mqtt_username(platform.api_key), platform.api_key)
    present: list[bool] = []
    probe.on_connect = lambda _c, _u, flags, *_: present.append(flags.session_present)
    if v5:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = expiry_s
        probe.connect(address.host, address.port, clean_start=False, properties=props)
    else:
        probe.connect(address.host, address.port)
    probe.loop_start()
    deadline = time.monotonic() + 10
    while not present and time.monotonic() < deadline:
        time.sleep(0.05)
    probe.disconnect()
    probe.loop_stop()
    assert present, "the probe did not connect"
    return present[0]


def test_the_broker_forgets_the_mqtt_session_of_a_finished_job(platform: PlatformThread) -> None:
    """Once the transcript is in, the SDK ends its MQTT session: the broker does not
    keep one per job for an hour (MQTT 5) or for ever (3.1.1)."""
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.transcribe(EVAL_DIR / "audio" / "whisper_jfk.flac")
    client_id = stable_client_id(platform.api_key, result.sid)
    # the broker handles the SDK's DISCONNECT in its own time (amqtt removes
    # disconnected clean sessions once a second; a loaded Mosquitto may lag)
    time.sleep(2.5)
    assert not _session_present(platform, client_id, expiry_s=60)
    assert _session_present(platform, client_id, expiry_s=0), "the probe's own session is seen"
