"""The load benchmark's distributed platform takes sessions as soon as it is
started: the gateway answers ``/healthz`` before the worker has joined its
groups, and until then it refuses a model no worker has served (``no_worker``,
503), which a burn counted as errors. Start returns once the worker's job and
stream groups have it as a member."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evaluation.distributed import services_env

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_load import Platform

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    services_env()  # skips (fails in CI) when the servers are not running
    running = Platform("faster-whisper", tmp_path, distributed=True).start()
    yield running
    running.stop()


def test_a_stream_and_an_upload_right_after_start_are_taken(platform: Platform) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    stream = httpx.post(f"{platform.url}/v1/streams", headers=headers, json={}, timeout=60)
    assert stream.status_code == 201, stream.text
    upload = httpx.post(
        f"{platform.url}/v1/sessions",
        headers=headers,
        files={"file": ("silence.wav", _silence_wav())},
        timeout=60,
    )
    assert upload.status_code in (200, 201, 202), upload.text


def _silence_wav() -> bytes:
    import io
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(bytes(32000))
    return out.getvalue()
