"""Deleting sessions through the real platform, in every mode: the CLI and the SDK
over HTTP, and a device over MQTT alone. Afterwards the session answers 404, search
finds nothing of it, and a new subscriber of its topics gets no retained message."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform
from tests.broker.conftest import PahoClient
from tests.helpers import PlatformThread
from voxwire.access.keys import key_id_of
from voxwire_client import ApiError, Client
from voxwire_client._mqtt import mqtt_username
from voxwire_client.api import QueryResult
from voxwire_client.topics import query_request_topic, query_result_topic

pytestmark = [pytest.mark.timeout(600), pytest.mark.any_engine]
JFK = EVAL_DIR / "audio" / "whisper_jfk.flac"
Platform = PlatformThread | DistributedPlatform


def _mqtt(platform: Platform, key: str) -> PahoClient:
    client = PahoClient(platform.mqtt_port, f"t-{uuid.uuid4().hex[:8]}", mqtt_username(key), key)
    assert not client.connect().is_failure
    return client


def _retained(platform: Platform, key: str, sid: str) -> list[str]:
    """The topics of the retained messages a new subscriber of the session gets."""
    client = _mqtt(platform, key)
    try:
        client.subscribe(f"transcription/{sid}/+")
        got = []
        while (message := client.next_message(timeout=1.5)) is not None:
            got.append(message.topic)
        return sorted(got)
    finally:
        client.close()


def _gone(platform: Platform, key: str, sid: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    for path in ("", "/transcript", "/messages", "/audio"):
        answer = httpx.get(f"{platform.url}/v1/sessions/{sid}{path}", headers=headers)
        assert answer.status_code == 404, (path, answer.text)
    assert _retained(platform, key, sid) == []


def test_an_upload_is_deleted_by_its_owner_only(platform: Platform) -> None:
    stranger = platform.new_tenant_key(f"stranger-{uuid.uuid4().hex[:6]}")
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        sid = client.transcribe(JFK, prompts=["ask not what your country"]).sid
        deadline = time.monotonic() + 60  # the index follows the store a moment later
        while not client.search("country", sids=[sid]).hits:
            assert time.monotonic() < deadline, "never indexed"
            time.sleep(0.5)
        topics = _retained(platform, platform.api_key, sid)
        assert topics == [f"transcription/{sid}/{k}" for k in ("match", "progress", "result")]
        with Client(platform.url, stranger, platform.mqtt_url) as theirs:
            with pytest.raises(ApiError) as refused:
                theirs.delete(sid)
            assert refused.value.status == 404
        assert client.session(sid).sid == sid
        deleted = subprocess.run(
            [sys.executable, "-m", "voxwire.cli", "sessions", "delete", sid, "--yes",
             "--url", platform.url, "--api-key", platform.api_key],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert deleted.returncode == 0, deleted.stderr
        assert f"deleted {sid}" in deleted.stdout
        _gone(platform, platform.api_key, sid)
        assert client.search("country", sids=[sid]).hits == ()
        client.delete(sid)  # again: still fine


def test_a_device_deletes_its_session_over_mqtt(platform: Platform) -> None:
    device = platform.new_device_key(f"mic-{uuid.uuid4().hex[:6]}")
    with Client(platform.url, device, platform.mqtt_url) as client:
        sid = client.upload(JFK).sid
        deadline = time.monotonic() + 120
        while client.session(sid).status.value not in ("completed", "failed"):
            assert time.monotonic() < deadline, "the upload did not finish"
            time.sleep(0.5)
    key_id = key_id_of(device)
    assert key_id is not None
    mqtt = _mqtt(platform, device)
    try:
        qid = f"del-{uuid.uuid4().hex[:8]}"
        assert mqtt.subscribe(query_result_topic(key_id, qid)) == [1]
        body = json.dumps({"op": "delete_session", "sid": sid}).encode()
        mqtt.publish(query_request_topic(key_id, qid), body, qos=1)
        message = mqtt.next_message(timeout=30)
        assert message is not None, "no answer"
        answer = QueryResult.model_validate_json(message.payload)
    finally:
        mqtt.close()
    assert answer.error is None and answer.deleted is not None and answer.deleted.sid == sid
    _gone(platform, device, sid)
    _gone(platform, platform.api_key, sid)
