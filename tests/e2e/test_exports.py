"""Word times in the stored transcript and its exports (txt, SRT, WebVTT),
through the real platform: HTTP, SDK and CLI, in every mode."""

from __future__ import annotations

import asyncio
import html
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import srt
import webvtt

from evaluation.corpus import EVAL_DIR, normalize
from evaluation.distributed import DistributedPlatform
from tests.helpers import PlatformThread
from voxwire.platform import build
from voxwire.store import SessionRecord, Store
from voxwire_client import Client
from voxwire_client.messages import SegmentData, SegmentMessage, SessionStatus, WordData

pytestmark = [pytest.mark.timeout(600), pytest.mark.any_engine]
JFK = EVAL_DIR / "audio" / "whisper_jfk.flac"
Platform = PlatformThread | DistributedPlatform


def _get(platform: Platform, sid: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{platform.url}/v1/sessions/{sid}/transcript",
        params=params,
        headers={"Authorization": f"Bearer {platform.api_key}"},
        timeout=30,
    )


@pytest.fixture(scope="module")
def jfk_sid(platform: Platform) -> str:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        return client.transcribe(JFK).sid


def test_the_stored_transcript_has_word_times(platform: Platform, jfk_sid: str) -> None:
    response = _get(platform, jfk_sid)  # json, the default, as before
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    body = response.json()
    assert body == _get(platform, jfk_sid, format="json").json()
    segments = [SegmentData.model_validate(s) for s in body["segments"]]
    assert "country" in body["text"] and segments
    for segment in segments:
        assert segment.words, segment
        assert normalize(" ".join(w.word for w in segment.words)) == normalize(segment.text)
        starts = [w.start_ms for w in segment.words]
        assert starts == sorted(starts)
        assert all(
            segment.start_ms <= w.start_ms <= w.end_ms <= segment.end_ms for w in segment.words
        )


def test_exports_parse_and_hold_the_transcript(platform: Platform, jfk_sid: str) -> None:
    text = _get(platform, jfk_sid).json()["text"]

    txt = _get(platform, jfk_sid, format="txt")
    assert txt.headers["content-type"] == "text/plain; charset=utf-8"
    assert normalize(txt.text) == normalize(text)

    as_srt = _get(platform, jfk_sid, format="srt")
    assert as_srt.headers["content-type"].startswith("application/x-subrip")
    assert f'filename="{jfk_sid}.srt"' in as_srt.headers["content-disposition"]
    subs = list(srt.parse(as_srt.text))
    assert normalize(" ".join(s.content for s in subs)) == normalize(text)
    assert subs[-1].end.total_seconds() <= 11.0 and subs[0].start.total_seconds() < 1.0

    as_vtt = _get(platform, jfk_sid, format="vtt")
    assert as_vtt.headers["content-type"] == "text/vtt; charset=utf-8"
    captions = webvtt.from_buffer(io.StringIO(as_vtt.text))
    assert normalize(html.unescape(" ".join(c.text for c in captions))) == normalize(text)

    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        assert client.transcript_as(jfk_sid, "vtt") == as_vtt.text


def test_an_unknown_format_is_a_400_that_lists_the_formats(
    platform: Platform, jfk_sid: str
) -> None:
    response = _get(platform, jfk_sid, format="docx")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    for name in ("json", "txt", "srt", "vtt"):
        assert name in body["message"] and name in body["hint"]


def _with_store(platform: Platform, work: Callable[[Store], Awaitable[Any]]) -> Any:
    """Run ``work`` on the platform's own store."""
    if isinstance(platform, PlatformThread):

        async def embedded() -> Any:
            return await work(await platform.platform.adapters.store())

        return platform.call(embedded())

    async def distributed() -> Any:
        async with build(platform.settings) as built:
            return await work(await built.adapters.store())

    return asyncio.run(distributed())


def test_exports_show_the_speakers_of_a_stored_transcript(platform: Platform) -> None:
    sid = f"spk-{uuid.uuid4().hex[:12]}"
    said = [
        ("S1", 0, 2_000, "Good morning, everyone."),
        ("S2", 2_000, 4_500, "Morning! Shall we start?"),
        ("S1", 4_500, 6_000, "Yes, let's."),
    ]

    async def store_it(store: Store) -> None:
        grant = await store.key_grant(platform.api_key)
        assert grant is not None
        tenant = grant.tenant_id
        now = datetime.now(UTC)
        await store.create_session(SessionRecord(sid, tenant, SessionStatus.COMPLETED, now))
        for i, (speaker, start, end, text) in enumerate(said):
            words = tuple(
                WordData(
                    word=w, start_ms=start + 300 * j, end_ms=start + 300 * j + 250, probability=0.9
                )
                for j, w in enumerate(text.split())
            )
            segment = SegmentData(
                id=f"{sid}-{i}",
                index=i,
                start_ms=start,
                end_ms=end,
                text=text,
                speaker=speaker,
                words=words,
            )
            await store.record_message(
                SegmentMessage(sid=sid, seq=i + 1, type="final", segment=segment)
            )

    _with_store(platform, store_it)
    stored = _get(platform, sid).json()["segments"]
    assert [s["speaker"] for s in stored] == ["S1", "S2", "S1"]
    assert stored[1]["words"][0] == {
        "word": "Morning!",
        "start_ms": 2_000,
        "end_ms": 2_250,
        "probability": 0.9,
    }

    subs = list(srt.parse(_get(platform, sid, format="srt").text))
    assert [s.content.split(": ", 1)[0] for s in subs] == ["S1", "S2", "S1"]
    assert subs[1].content == "S2: Morning! Shall we start?"
    assert (
        subs[1].start.total_seconds() == 2.0 and subs[1].end.total_seconds() == 3.15
    )  # last word's end
    captions = webvtt.from_buffer(io.StringIO(_get(platform, sid, format="vtt").text))
    assert [c.voice for c in captions] == ["S1", "S2", "S1"]
    assert _get(platform, sid, format="txt").text.splitlines()[1] == (
        "S2: Morning! Shall we start?"
    )


def test_the_cli_prints_subtitles(platform: Platform) -> None:
    env = {
        **os.environ,
        "VOXWIRE_URL": platform.url,
        "VOXWIRE_API_KEY": platform.api_key,
        "VOXWIRE_MQTT_URL": platform.mqtt_url,
    }
    result = subprocess.run(
        [sys.executable, "-m", "voxwire.cli", "transcribe", str(JFK), "--format", "srt"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    subs = list(srt.parse(result.stdout))  # stdout holds only the subtitles
    assert "country" in " ".join(s.content for s in subs)
