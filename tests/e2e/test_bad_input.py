"""Bad input gets a clear error, reaches the session over MQTT, and loses nothing else."""

from __future__ import annotations

import io
import json
import wave

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from tests.helpers import Listener, PlatformThread
from voxwire.text.standing_prompts import MAX_PROMPTS
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]


def _post(platform: PlatformThread, name: str, data: bytes, **form: str) -> httpx.Response:
    return httpx.post(
        f"{platform.url}/v1/sessions",
        headers={"Authorization": f"Bearer {platform.api_key}"},
        files={"file": (name, data)},
        data=form,
        timeout=60,
    )


def _wav(seconds: float, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(seconds * rate))
    return buf.getvalue()


FLAC = (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes()

CASES = [
    ("empty.wav", b"", 422, "audio_empty"),
    ("notes.txt", b"hello, this is not audio at all\n" * 20, 422, "audio_unsupported"),
    ("cut.flac", FLAC[:400], 422, None),
    ("long.wav", _wav(120), 413, "audio_too_long"),
    ("../../etc/passwd", b"\x00" * 100, 422, None),
]


@pytest.mark.parametrize(("name", "data", "status", "code"), CASES, ids=[c[0] for c in CASES])
def test_bad_audio_is_refused_and_published(
    platform: PlatformThread, name: str, data: bytes, status: int, code: str | None
) -> None:
    response = _post(platform, name, data)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["message"] and body["code"].startswith("audio")
    if code:
        assert body["code"] == code
    sid = body["sid"]
    listener = Listener(platform.mqtt_port, platform.api_key, client_id=f"bad-{sid}")
    listener.connect()
    listener.subscribe(session_filter(sid))
    got = listener.wait_for(lambda g: any(json.loads(m.payload)["type"] == "error" for m in g), 20)
    listener.close()
    error = next(json.loads(m.payload) for m in got if json.loads(m.payload)["type"] == "error")
    assert error["code"] == body["code"]
    info = httpx.get(
        f"{platform.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {platform.api_key}"}
    ).json()
    assert info["status"] == "failed"


def test_oversized_upload_is_refused(platform: PlatformThread) -> None:
    response = _post(platform, "big.wav", b"\x00" * (9 * 1024 * 1024))
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "prompts",
    [
        "not json",
        '[""]',
        '{"a": 1}',
        json.dumps(["x"] * (MAX_PROMPTS + 1)),
        '["!!! ..."]',  # no words to listen for
        '[{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]',
        '[{"id": "a", "text": "three words here", "within": 2}]',
        '[{"id": "a", "text": "x", "slop": 99}]',
    ],
)
def test_invalid_prompts_are_refused(platform: PlatformThread, prompts: str) -> None:
    response = _post(platform, "jfk.flac", FLAC, prompts=prompts)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("sid", ["a/b", "a+b", "%23", "x" * 65, "a%00b", "ä"])
def test_hostile_session_ids(platform: PlatformThread, sid: str) -> None:
    response = httpx.get(
        f"{platform.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {platform.api_key}"}
    )
    assert response.status_code in (400, 404)
    assert "code" in response.json() or response.status_code == 404


def test_platform_keeps_serving_after_bad_input(platform: PlatformThread) -> None:
    for name, data, *_ in CASES:
        _post(platform, name, data)
    good = _post(platform, "jfk.flac", FLAC)
    assert good.status_code == 201
    assert httpx.get(f"{platform.url}/healthz").json()["status"] == "ok"
