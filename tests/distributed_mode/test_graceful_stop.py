"""SIGTERM stops a process cleanly: a worker terminated in the middle of a batch
of jobs takes no new job, finishes (or hands back) the ones it runs, commits,
leaves its Kafka group at once (its partitions move to the other worker without
waiting for the session timeout) and exits 0; every job completes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from evaluation.corpus import eval_with_text
from evaluation.distributed import DistributedPlatform
from voxwire_client import AsyncClient, Transcript

pytestmark = pytest.mark.timeout(300)

JOBS = 8
FILES = [i.path for i in eval_with_text() if i.duration_s <= 7]


def _count(platform: DistributedPlatform, name: str, pattern: str) -> int:
    return len(re.findall(pattern, platform.log(name, tail=None)))


def _jobs_done(platform: DistributedPlatform, name: str) -> int:
    return _count(platform, name, r"job \S+ done in")


def _assignments(platform: DistributedPlatform, name: str) -> int:
    return _count(platform, name, r"transcription\.jobs \(group \S+\): assigned partitions")


async def _transcribe_all(platform: DistributedPlatform, paths: list[Path]) -> list[Transcript]:
    async def one(path: Path) -> Transcript:
        async with AsyncClient(platform.url, platform.api_key, platform.mqtt_url) as client:
            return await client.transcribe(path)

    return await asyncio.wait_for(asyncio.gather(*(one(p) for p in paths)), 240)


@pytest.mark.parametrize(
    "drain_s", ["20", "0"], ids=["jobs-in-flight-finish", "jobs-in-flight-handed-back"]
)
def test_a_terminated_worker_leaves_the_group_and_exits_0_and_every_job_completes(
    tmp_path: Path, drain_s: str
) -> None:
    """SIGTERM worker-0 while it runs a job: with time to drain it finishes the
    job; without (``drain_s`` 0) it aborts it and the other worker runs it."""
    platform = DistributedPlatform(tmp_path, workers=2, drain_s=drain_s).start()
    try:
        _terminate_a_worker_mid_batch(platform, handing_back=drain_s == "0")
    except BaseException:
        print(platform.digest())
        raise
    finally:
        platform.stop()


def _terminate_a_worker_mid_batch(platform: DistributedPlatform, *, handing_back: bool) -> None:
    worker = platform.processes["worker-0"]
    assigned_before = _assignments(platform, "worker-1")
    exit_code: list[int] = []

    def started() -> int:
        return _count(platform, "worker-0", r"job \S+ started")

    batch_done = threading.Event()

    def terminate_mid_batch() -> None:
        """Once worker-0 finished a job and runs the next; if the jobs all ran
        elsewhere (their sids' partitions), once the batch is done."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not batch_done.is_set():
            done = _jobs_done(platform, "worker-0")
            if done >= 1 and started() > done:
                break
            time.sleep(0.05)
        os.killpg(worker.pid, signal.SIGTERM)
        exit_code.append(worker.wait(60))

    paths = [FILES[i % len(FILES)] for i in range(JOBS)]
    stopper = threading.Thread(target=terminate_mid_batch)
    stopper.start()
    try:
        transcripts = asyncio.run(_transcribe_all(platform, paths))
    finally:
        batch_done.set()
        stopper.join()

    assert len(transcripts) == JOBS and all(t.text for t in transcripts)
    for transcript in transcripts:
        indexes = [s.index for s in transcript.segments]
        assert indexes == list(range(len(indexes))), f"{transcript.sid}: {indexes}"
        assert len({s.id for s in transcript.segments}) == len(indexes)
    assert exit_code == [0], platform.log("worker-0")
    log = platform.log("worker-0", tail=None)
    assert "SIGTERM: stopping" in log
    assert re.search(r"transcription\.jobs \(group \S+\): left the group", log), log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert log.rstrip().endswith("stopped"), log[-1000:]
    # every job it started ended: done and committed, or handed back
    handed_back = _count(platform, "worker-0", r"job \S+ aborted: the worker is stopping")
    assert started() == _jobs_done(platform, "worker-0") + handed_back, log[-3000:]
    if handing_back and "stopping: finishing" in log:  # a job was running: it went back
        assert handed_back >= 1, log[-3000:]
    print(f"worker-0: {started()} jobs started, {handed_back} handed back")
    # the other worker took over the partitions the terminated one left
    assert _jobs_done(platform, "worker-1") > 0
    # worker-0 left the group on exit; worker-1 logs its new assignment when the
    # rebalance reaches it, which may be after worker-0 has exited
    deadline = time.monotonic() + 30
    while _assignments(platform, "worker-1") <= assigned_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _assignments(platform, "worker-1") > assigned_before, platform.log("worker-1")


def test_a_terminated_gateway_finishes_an_upload_in_flight_and_the_bridge_stops_cleanly(
    tmp_path: Path,
) -> None:
    """SIGTERM while an upload's body is half sent: the gateway accepts no new
    connection, answers the upload (201), exits 0; the session is transcribed.
    Then the bridge, terminated, leaves its groups and exits 0."""
    platform = DistributedPlatform(tmp_path, workers=1).start()
    try:
        _upload_across_a_gateway_stop(platform)
    except BaseException:
        print(platform.digest())
        raise
    finally:
        platform.stop()


def _upload_across_a_gateway_stop(platform: DistributedPlatform) -> None:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    with httpx.Client() as client:
        request = client.build_request(
            "POST",
            f"{platform.url}/v1/sessions",
            headers=headers,
            files={"file": ("a.flac", FILES[0].read_bytes(), "application/octet-stream")},
        )
    body = request.read()
    half_sent, go_on = threading.Event(), threading.Event()
    answers: list[httpx.Response] = []

    def body_in_two_halves() -> Iterator[bytes]:
        yield body[: len(body) // 2]
        half_sent.set()
        go_on.wait(60)
        yield body[len(body) // 2 :]

    def upload() -> None:
        content_type = {"Content-Type": request.headers["Content-Type"]}
        answers.append(
            httpx.post(
                f"{platform.url}/v1/sessions",
                headers=headers | content_type,
                content=body_in_two_halves(),
                timeout=60,
            )
        )

    uploader = threading.Thread(target=upload)
    uploader.start()
    try:
        assert half_sent.wait(30)
        gateway = platform.processes["gateway"]
        os.killpg(gateway.pid, signal.SIGTERM)
        _wait_for(lambda: "SIGTERM: stopping" in platform.log("gateway"))
        _wait_for(lambda: _refused(f"{platform.url}/healthz"))  # no new connections
    finally:
        go_on.set()
        uploader.join()
    assert answers and answers[0].status_code == 201, answers and answers[0].text
    assert gateway.wait(60) == 0, platform.log("gateway")
    assert platform.log("gateway").rstrip().endswith("stopped")
    sid = answers[0].json()["sid"]

    platform.processes.pop("gateway")
    platform.spawn("gateway")
    platform.wait_ready()
    _wait_for(lambda: _status(platform, sid) == "completed", timeout=120)

    bridge = platform.processes["bridge"]
    os.killpg(bridge.pid, signal.SIGTERM)
    assert bridge.wait(60) == 0, platform.log("bridge")
    log = platform.log("bridge", tail=None)
    assert re.search(r"transcription\.results \(group \S+\): left the group", log), log[-3000:]
    assert "Traceback" not in log and log.rstrip().endswith("stopped"), log[-3000:]


def _refused(url: str) -> bool:
    """Whether a new request goes unserved: refused, or (accepted in the instant the
    listening socket closed) closed without an answer."""
    try:
        httpx.get(url, timeout=5)
    except (httpx.ConnectError, httpx.RemoteProtocolError):
        return True
    return False


def _status(platform: DistributedPlatform, sid: str) -> str:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    return str(httpx.get(f"{platform.url}/v1/sessions/{sid}", headers=headers).json()["status"])


def _wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)
