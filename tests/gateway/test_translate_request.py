"""What a session may ask of translation, over HTTP and MQTT alike: ``task``
"translate" reaches the file job and the stream's start record with a
multilingual model (the language spoken detected unless given); an
English-only model (tiny.en) cannot translate, which is a 400 (over MQTT: an
invalid_request answer) that names the models that can; a task that does not
exist is refused with the two that do."""

from __future__ import annotations

import asyncio
import io
import json
import wave
from pathlib import Path

import pytest

from evaluation.corpus import EVAL_DIR
from tests.bridge.test_queries import Bridge
from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.bus import MemoryBus
from voxwire.store import SqliteStore
from voxwire.wire.records import FileJob, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, JOBS_TOPIC
from voxwire_client.messages import Task

FLAC = (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes()
FILES = {"file": ("jfk.flac", FLAC)}


def _short_wav() -> bytes:
    """Half a second of 16 kHz silence: one part of an MQTT upload."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16_000)
        wav.writeframes(bytes(16_000))
    return out.getvalue()


async def _tenant_key(store: SqliteStore) -> dict[str, str]:
    tenant = await store.create_tenant("t")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "t")
    return {"Authorization": f"Bearer {key.plaintext}"}


async def test_a_multilingual_model_takes_translate_on_uploads_and_streams(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    auth = await _tenant_key(store)
    jobs, audio = bus.subscribe(JOBS_TOPIC, "w"), bus.subscribe(AUDIO_TOPIC, "w")
    async with gateway_client(tmp_path, store, bus=bus, model="base") as http:
        for form in ({"task": "translate", "language": "auto"}, {"task": "TRANSLATE "}, {}):
            upload = await http.post("/v1/sessions", files=FILES, data=form, headers=auth)
            assert upload.status_code == 201, upload.text
        for body in ({"task": "translate", "language": "de"}, {"task": "translate"}):
            stream = await http.post("/v1/streams", json=body, headers=auth)
            assert stream.status_code == 201, stream.text
    asked = [FileJob.model_validate_json((await jobs.next()).value) for _ in range(3)]
    assert [(job.task, job.language) for job in asked] == [
        (Task.TRANSLATE, "auto"),
        (Task.TRANSLATE, "auto"),  # a translation from a language not given: detected
        (Task.TRANSCRIBE, "en"),  # the defaults
    ]
    starts = [decode_audio_record((await audio.next()).value) for _ in range(2)]
    assert all(isinstance(start, StreamStart) for start in starts)
    assert [(s.request.task, s.request.language) for s in starts if isinstance(s, StreamStart)] == [
        (Task.TRANSLATE, "de"),
        (Task.TRANSLATE, "auto"),
    ]


async def test_an_english_only_model_cannot_translate(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    auth = await _tenant_key(store)
    jobs = bus.subscribe(JOBS_TOPIC, "w")
    async with gateway_client(tmp_path, store, bus=bus, model="tiny.en") as http:
        form = {"task": "translate"}
        upload = await http.post("/v1/sessions", files=FILES, data=form, headers=auth)
        stream = await http.post("/v1/streams", json={"task": "translate"}, headers=auth)
        for refused in (upload, stream):
            assert refused.status_code == 400, refused.text
            body = refused.json()
            assert body["code"] == "invalid_request"
            assert body["message"] == "model 'tiny.en' is English-only: it cannot translate"
            assert "base" in body["hint"]
        plain = await http.post("/v1/sessions", files=FILES, data={"task": ""}, headers=auth)
        assert plain.status_code == 201, plain.text
    assert FileJob.model_validate_json((await jobs.next()).value).task is Task.TRANSCRIBE


@pytest.mark.parametrize("task", ["translation", "to-english"])
async def test_a_task_that_does_not_exist_is_refused(tmp_path: Path, task: str) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    auth = await _tenant_key(store)
    async with gateway_client(tmp_path, store, model="base") as http:
        upload = await http.post("/v1/sessions", files=FILES, data={"task": task}, headers=auth)
        stream = await http.post("/v1/streams", json={"task": task}, headers=auth)
    assert upload.status_code == 400, upload.text
    assert upload.json()["message"] == f"invalid task {task!r}"
    assert "'transcribe' or 'translate'" in upload.json()["hint"]
    assert stream.status_code == 422, stream.text  # the JSON body's schema says the two tasks
    assert "transcribe" in stream.text and "translate" in stream.text


@pytest.mark.parametrize(("model", "refused"), [("tiny.en", True), ("base", False)])
async def test_mqtt_requests_ask_for_translation_as_http_ones_do(
    tmp_path: Path, model: str, refused: bool
) -> None:
    bridge = Bridge(tmp_path, model=model)
    bridge.tenant = await bridge.store.create_tenant("t")
    await bridge.store.add_api_key(bridge.tenant.id, bridge.key, "device")
    jobs = bridge.bus.subscribe(JOBS_TOPIC, "w")
    running = asyncio.create_task(bridge.service.run())
    try:
        opening = {"op": "open_stream", "stream": {"task": "translate"}}
        await bridge.ask(bridge.key.key_id, "open", json.dumps(opening).encode())
        await bridge.part("rec", 0, _short_wav())
        finish = {
            "op": "finish_upload",
            "upload": "rec",
            "parts": 1,
            "filename": "a.wav",
            "task": "translate",
        }
        await bridge.ask(bridge.key.key_id, "fin", json.dumps(finish).encode())
        stream, upload = await bridge.answered(1), await bridge.answered(2)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    if refused:
        for answer in (stream, upload):
            assert answer.error is not None and answer.error.code == "invalid_request"
            assert "cannot translate" in answer.error.message
    else:
        assert stream.stream is not None and upload.session is not None, (stream, upload)
        assert FileJob.model_validate_json((await jobs.next()).value).task is Task.TRANSLATE
