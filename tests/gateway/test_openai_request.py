"""The OpenAI routes at the gateway: what a request's fields become (the job's
model, task, language and vocabulary), how it answers once its session's
messages are stored (each format, the stream of text events), and OpenAI's error
body for each way a request goes wrong, while the native routes keep theirs.
The transcripts here are stored by the test, as the results relay stores a
worker's; tests/e2e/test_openai.py runs it all through the ``openai`` SDK
against real workers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evaluation.corpus import EVAL_DIR
from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.bus import MemoryBus
from voxwire.gateway.openai_api.form import prompt_vocabulary
from voxwire.store import SqliteStore
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC
from voxwire_client.messages import (
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    Task,
    TranscriptMessage,
    WordData,
)

FLAC = (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes()
FILES = {"file": ("jfk.flac", FLAC)}
SEGMENTS = (
    SegmentData(
        id="a",
        index=0,
        start_ms=0,
        end_ms=2000,
        text="Ask not",
        language="en",
        words=(
            WordData(word=" Ask", start_ms=0, end_ms=900, probability=0.9),
            WordData(word=" not", start_ms=900, end_ms=2000, probability=0.8),
        ),
    ),
    SegmentData(
        id="b", index=1, start_ms=2500, end_ms=4000, text="what you can do.", language="en"
    ),
)


async def _key(store: SqliteStore) -> dict[str, str]:
    tenant = await store.create_tenant("t")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "t")
    return {"Authorization": f"Bearer {key.plaintext}"}


async def _transcribe(store: SqliteStore, job: FileJob) -> None:
    """Store what a worker publishes for ``job``: two finals, the transcript, completed."""
    sid, seq = job.sid, 100
    for segment in SEGMENTS:
        seq += 1
        await store.record_message(SegmentMessage(sid=sid, seq=seq, type="final", segment=segment))
        await asyncio.sleep(0.15)
    text = " ".join(s.text for s in SEGMENTS)
    await store.record_message(
        TranscriptMessage(
            sid=sid, seq=seq + 1, text=text, language="en", duration_ms=4000, segments=SEGMENTS
        )
    )
    await store.record_message(
        ProgressMessage(
            sid=sid, seq=seq + 2, status=SessionStatus.COMPLETED, percent=100, duration_ms=4000
        )
    )


def test_a_prompt_becomes_vocabulary_entries() -> None:
    assert prompt_vocabulary("ComfyUI, Kubernetes") == ("ComfyUI", "Kubernetes")
    long = "a meeting about " + "the quarterly numbers " * 5
    pieces = prompt_vocabulary(long)
    assert all(len(p) <= 64 for p in pieces) and " ".join(pieces) == " ".join(long.split())
    assert prompt_vocabulary("  ") == ()


async def test_fields_reach_the_job_and_the_answer_comes_in_each_format(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    auth = await _key(store)
    jobs = bus.subscribe(JOBS_TOPIC, "w")
    answers = {}
    async with gateway_client(tmp_path, store, bus=bus, model="base") as http:
        for fmt in ("json", "text", "srt", "vtt", "verbose_json"):
            form = {
                "model": "gpt-4o-mini-transcribe",
                "response_format": fmt,
                "prompt": "ComfyUI, Kubernetes",
                "language": "en",
                "temperature": "0.2",
            }
            if fmt == "verbose_json":
                form["timestamp_granularities[]"] = ["word", "segment"]  # type: ignore[assignment]
            request = asyncio.create_task(
                http.post("/v1/audio/transcriptions", files=FILES, data=form, headers=auth)
            )
            job = FileJob.model_validate_json((await jobs.next()).value)
            await _transcribe(store, job)
            answers[fmt] = await request
            assert answers[fmt].headers["x-voxwire-session"] == job.sid
        assert (job.model, job.task, job.language) == ("base", Task.TRANSCRIBE, "en")
        assert job.vocabulary == ("ComfyUI", "Kubernetes")

        request = asyncio.create_task(
            http.post("/v1/audio/translations", files=FILES, data={"model": "base"}, headers=auth)
        )
        job = FileJob.model_validate_json((await jobs.next()).value)
        await _transcribe(store, job)
        assert (await request).status_code == 200
        assert (job.model, job.task, job.language) == ("base", Task.TRANSLATE, "auto")

    assert answers["json"].json() == {
        "text": "Ask not what you can do.",
        "usage": {"type": "duration", "seconds": 4.0},
    }
    assert answers["text"].text == "Ask not what you can do.\n"
    assert answers["srt"].text.startswith("1\n00:00:00,000 --> 00:00:02,000\nAsk not\n")
    assert answers["vtt"].text.startswith("WEBVTT\n")
    verbose = answers["verbose_json"].json()
    assert (verbose["task"], verbose["language"], verbose["duration"]) == ("transcribe", "en", 4.0)
    assert verbose["words"] == [
        {"word": "Ask", "start": 0.0, "end": 0.9},
        {"word": "not", "start": 0.9, "end": 2.0},
    ]
    first, second = verbose["segments"]
    assert set(first) == {
        "id",
        "seek",
        "start",
        "end",
        "text",
        "tokens",
        "temperature",
        "avg_logprob",
        "compression_ratio",
        "no_speech_prob",
    }
    assert (first["id"], first["start"], first["end"], first["temperature"]) == (0, 0.0, 2.0, 0.2)
    assert first["avg_logprob"] == pytest.approx(-0.164, abs=0.001)  # mean of ln 0.9, ln 0.8
    assert (second["id"], second["seek"], second["avg_logprob"]) == (1, 250, 0.0)


async def test_a_stream_sends_each_final_then_the_whole_text(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    auth = await _key(store)
    jobs = bus.subscribe(JOBS_TOPIC, "w")

    async def worker() -> None:
        await _transcribe(store, FileJob.model_validate_json((await jobs.next()).value))

    running = asyncio.create_task(worker())  # the ASGI transport answers all at once
    async with gateway_client(tmp_path, store, bus=bus) as http:
        form = {"model": "whisper-1", "stream": "true"}
        answer = await http.post("/v1/audio/transcriptions", files=FILES, data=form, headers=auth)
    await running
    assert answer.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in answer.text.splitlines() if line.startswith("data: ")]
    events = [json.loads(line[6:]) for line in lines]
    assert events == [
        {"type": "transcript.text.delta", "delta": "Ask not"},
        {"type": "transcript.text.delta", "delta": " what you can do."},
        {"type": "transcript.text.done", "text": "Ask not what you can do."},
    ]


async def test_errors_are_in_openais_shape_and_the_native_routes_keep_theirs(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    auth = await _key(store)
    path = "/v1/audio/transcriptions"
    async with gateway_client(tmp_path, store, model="tiny.en") as http:
        no_key = await http.post(path, files=FILES, data={"model": "whisper-1"})
        unknown = await http.post(path, files=FILES, data={"model": "large-v9"}, headers=auth)
        bad_format = await http.post(
            path, files=FILES, data={"model": "whisper-1", "response_format": "xml"}, headers=auth
        )
        too_hot = await http.post(
            path, files=FILES, data={"model": "whisper-1", "temperature": "3"}, headers=auth
        )
        no_file = await http.post(path, data={"model": "whisper-1"}, headers=auth)
        english_only = await http.post(
            "/v1/audio/translations", files=FILES, data={"model": "whisper-1"}, headers=auth
        )
        not_audio = await http.post(
            path, files={"file": ("a.wav", b"no")}, data={"model": "whisper-1"}, headers=auth
        )
        models = await http.get("/v1/models", headers=auth)
        native = await http.get("/v1/sessions")
    errors = {
        "no_key": (no_key, 401, "invalid_api_key", None),
        "unknown": (unknown, 404, "model_not_found", "model"),
        "bad_format": (bad_format, 400, None, "response_format"),
        "too_hot": (too_hot, 400, None, "temperature"),
        "no_file": (no_file, 400, "missing_required_parameter", "file"),
        "english_only": (english_only, 400, "invalid_request", None),
        "not_audio": (not_audio, 400, "audio_unsupported", None),
    }
    for name, (answer, status, code, param) in errors.items():
        body = answer.json()
        assert answer.status_code == status, (name, answer.text)
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
        assert (body["error"]["code"], body["error"]["param"]) == (code, param), (name, body)
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    assert models.json() == {
        "object": "list",
        "data": [
            {
                "id": "tiny.en",
                "object": "model",
                "created": models.json()["data"][0]["created"],
                "owned_by": "voxwire",
            }
        ],
    }
    assert native.status_code == 401 and native.json()["code"] == "unauthorized"
