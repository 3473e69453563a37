"""Re-transcription, end to end in every mode: an upload and a finished live stream
are transcribed again (here with the vocabulary that makes tiny.en write
"ComfyUI"), as version 2: delivered with ``version`` 2 and ``seq`` after the first
version's, stored as the session's transcript and in the search index (the new
words are found, the words only the first version had are not), while version 1
stays readable. The live stream's archived audio plays back as WAV with the
stream's length."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
import wave
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest

from evaluation.corpus import EVAL_DIR, pcm16
from tests.helpers import PlatformThread
from voxwire.audio.decoding import decode
from voxwire.cli.retranscribe import due
from voxwire_client import ApiError, Client, StreamRequest, Task, TranscriptMessage, pcm_chunks
from voxwire_client.api import SessionInfo
from voxwire_client.versions import RetranscribeAccepted

pytestmark = pytest.mark.timeout(600)

HOTWORDS = EVAL_DIR / "audio" / "fasterwhisper_hotwords.mp3"
JFK = EVAL_DIR / "audio" / "whisper_jfk.flac"


def _archived_wav(platform: PlatformThread, sid: str) -> bytes:
    """The stream's audio: written once the stream has ended, in the background."""
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(f"{platform.url}/v1/sessions/{sid}/audio", headers=headers)
        if response.status_code != 404 or time.monotonic() > deadline:
            response.raise_for_status()
            return response.content
        time.sleep(0.2)


def _hits(client: Client, q: str, sid: str, *, until: bool) -> int:
    """How many hits ``q`` has in ``sid``, once it has some (``until`` True) or
    none (False): the index follows the store a moment later."""
    deadline = time.monotonic() + 60
    while True:
        hits = len(client.search(q, sids=[sid]).hits)
        if bool(hits) == until or time.monotonic() > deadline:
            return hits
        time.sleep(0.5)


def test_an_upload_and_a_live_stream_are_transcribed_again(platform: PlatformThread) -> None:
    samples = decode(HOTWORDS.read_bytes()).samples
    pcm = pcm16(np.concatenate([samples, np.zeros(16_000, dtype=np.float32)]))
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        upload = client.transcribe(HOTWORDS)
        live = client.stream(pcm_chunks(pcm), StreamRequest(), speed=4)

        with wave.open(io.BytesIO(_archived_wav(platform, live.sid))) as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16_000, 1, 2)
            assert wav.getnframes() == len(pcm) // 2  # the whole stream, as it was sent

        with pytest.raises(ApiError) as unserved:
            client.retranscribe(upload.sid, model="large-v9")
        assert unserved.value.status == 400 and platform.settings.engine.model in (
            unserved.value.hint or ""
        )
        with pytest.raises(ApiError) as english_only:
            client.retranscribe(upload.sid, task=Task.TRANSLATE)
        assert english_only.value.status == 400 and "cannot translate" in english_only.value.message

        for first in (upload, live):
            # tiny.en writes "comfy eye" without the vocabulary, whisper.cpp "comfyu eye"
            heard = next(w for w in re.findall(r"[a-z]+", first.text.lower()) if "comfy" in w)
            assert heard != "comfyui" and _hits(client, heard, first.sid, until=True)
            before = client.session(first.sid).last_seq
            accepted = client.retranscribe(first.sid, vocabulary=["ComfyUI"])
            assert (accepted.version, accepted.first_seq) == (2, before + 1)
            with pytest.raises(ApiError) as busy:  # one re-transcription at a time
                client.retranscribe(first.sid)
            assert busy.value.status == 409

            messages = client.wait_version(accepted)
            assert {m.version for m in messages} == {2}
            assert [m.seq for m in messages] == list(range(before + 1, before + 1 + len(messages)))
            (delivered,) = [m for m in messages if isinstance(m, TranscriptMessage)]
            assert "comfyui" in delivered.text.lower()

            current = client.transcript(first.sid)
            assert (current.version, current.versions) == (2, (1, 2))
            assert current.text == delivered.text and current.status == "completed"
            assert all(s.id.startswith(f"{first.sid}-v2-") for s in current.segments)
            old = client.transcript_version(first.sid, 1)
            assert (old.version, old.text) == (1, first.text)
            assert client.session(first.sid).version == 2

            assert _hits(client, "ComfyUI", first.sid, until=True)
            assert _hits(client, heard, first.sid, until=False) == 0


def test_the_command_line_transcribes_sessions_again(platform: PlatformThread) -> None:
    env = {
        **os.environ,
        "VOXWIRE_URL": platform.url,
        "VOXWIRE_API_KEY": platform.api_key,
        "VOXWIRE_MQTT_URL": platform.mqtt_url,
        "COLUMNS": "200",
    }
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        sid = client.transcribe(JFK).sid

    def voxwire(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "voxwire.cli", "retranscribe", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)

    done = voxwire(sid)
    assert done.returncode == 0, done.stderr
    assert f"{sid}\tdone\tversion 2" in done.stdout
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    nothing = voxwire("--since", tomorrow)
    assert nothing.returncode == 0 and "0 session(s)" in nothing.stderr
    both = voxwire(sid, "--since", tomorrow)
    assert both.returncode == 1 and "not both" in both.stderr
    unserved = voxwire(sid, "--model", "large-v9")
    assert unserved.returncode == 1 and f"{sid}\trefused\t" in unserved.stdout


def test_since_picks_the_completed_first_versions_created_since_then() -> None:
    def session(sid: str, day: int, status: str = "completed", version: int = 1) -> SessionInfo:
        created = datetime(2026, 1, day, 12, tzinfo=UTC)
        return SessionInfo(sid=sid, status=status, created_at=created, version=version)

    listed = [
        session("s_new", 3),
        session("s_running", 3, status="transcribing"),
        session("s_done_before", 2, version=2),
        session("s_mid", 2),
        session("s_old", 1),
    ]
    assert due(listed, datetime(2026, 1, 2), again=False) == ["s_mid", "s_new"]
    assert due(listed, datetime(2026, 1, 2), again=True) == ["s_done_before", "s_mid", "s_new"]


def test_a_version_may_ask_for_speakers_but_keeps_the_first_versions_prompts_and_redaction(
    platform: PlatformThread,
) -> None:
    """A re-transcription takes a session's options: ``diarize`` labels the new
    version's segments; ``prompts`` and ``redact`` belong to the session and are refused."""
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        first = client.transcribe(JFK)
        assert first.segments and not any(s.speaker for s in first.segments)
        url = f"{platform.url}/v1/sessions/{first.sid}/retranscribe"
        for kept in ({"prompts": ["ask not"]}, {"redact": "mask"}):
            refused = httpx.post(url, json=kept, headers=headers)
            assert refused.status_code == 422, refused.text
            assert next(iter(kept)) in refused.text
        answered = httpx.post(url, json={"diarize": True}, headers=headers)
        assert answered.status_code == 202, answered.text
        messages = client.wait_version(RetranscribeAccepted.model_validate_json(answered.content))
        (delivered,) = [m for m in messages if isinstance(m, TranscriptMessage)]
        assert delivered.segments and all(s.speaker == "S1" for s in delivered.segments)
