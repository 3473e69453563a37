"""What the distributed-mode tests check of :class:`DistributedPlatform`: its
readiness, its Mosquitto reloaded, its jobs followed and counted."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from evaluation.distributed import SERVICES, DistributedPlatform
from voxwire.core.readiness import READY_PATH
from voxwire_client import AsyncClient, Transcript


def reload_mosquitto() -> None:
    """`scripts/services.sh reload mosquitto`: Mosquitto reads its password and ACL
    files, certificates and revocation list again (SIGHUP; it drops no client)."""
    subprocess.run(
        [str(SERVICES), "reload", "mosquitto"], capture_output=True, check=True, timeout=60
    )


def readyz(url: str, *, until: int, timeout: float = 120) -> dict[str, Any]:
    """``/readyz`` once it answers ``until`` (polled while the process starts)."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{url}{READY_PATH}", timeout=10)
        except httpx.TransportError:
            time.sleep(0.3)
            continue
        last = {"http": answer.status_code, **answer.json()}
        if answer.status_code == until:
            return last
        time.sleep(0.3)
    raise AssertionError(f"{url}{READY_PATH} never answered {until}: {last}")


def wait_until(predicate: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


def jobs_done(platform: DistributedPlatform, name: str) -> int:
    """The file jobs worker ``name`` finished (logged once the bus has their last message)."""
    return len(re.findall(r"job \S+ done in", platform.log(name, tail=None)))


def assert_complete(results: list[tuple[Transcript, dict[str, Any]]]) -> None:
    """Each (transcript the SDK followed, transcript the server stored): segments
    numbered once each from 0, the same in both, the session completed."""
    for transcript, server in results:
        indexes = [s.index for s in transcript.segments]
        assert indexes == list(range(len(indexes))), f"{transcript.sid}: {indexes}"
        assert len({s.id for s in transcript.segments}) == len(indexes)
        assert [s.text for s in transcript.segments] == [s["text"] for s in server["segments"]]
        assert transcript.text and server["status"] == "completed"


class Jobs:
    """``expected`` clients, each uploading one file and following its session
    over ``url`` (the platform's first gateway unless given); what each has
    reached is kept so that a run that does not finish says where each
    unfinished session stopped."""

    def __init__(self, platform: DistributedPlatform, expected: int, url: str = "") -> None:
        self.platform = platform
        self.expected = expected
        self.url = url or platform.url
        self.sids: list[str] = []
        self.finished: set[str] = set()

    async def one_client(
        self, path: Path, upload_url: str = ""
    ) -> tuple[Transcript, dict[str, Any]]:
        """Upload ``path`` (over ``upload_url``, else the following client's
        gateway); follow the session to its end; (its transcript, the stored one)."""
        platform = self.platform
        async with AsyncClient(self.url, platform.api_key, platform.mqtt_url) as client:
            if upload_url:
                async with AsyncClient(upload_url, platform.api_key, platform.mqtt_url) as up:
                    created = await up.upload(path)
            else:
                created = await client.upload(path)
            self.sids.append(created.sid)
            result = await client.follow(created.sid)
            self.finished.add(created.sid)
            server = await client.transcript(result.sid)
            return result, server.model_dump()

    def story(self) -> str:
        """Where the unfinished sessions stopped: their status and messages on the
        server, and what the processes logged about them."""
        unfinished = [sid for sid in self.sids if sid not in self.finished]
        lines = [
            f"{self.expected - len(self.sids)} uploads unanswered, "
            f"{len(unfinished)} of {len(self.sids)} sessions unfinished"
        ]
        headers = {"Authorization": f"Bearer {self.platform.api_key}"}
        for sid in unfinished[:4]:
            try:
                page = httpx.get(
                    f"{self.url}/v1/sessions/{sid}/messages", headers=headers, timeout=10
                ).json()
                kinds = [m.get("type") for m in page.get("messages", [])]
            except (httpx.HTTPError, ValueError) as exc:
                kinds = [f"history unreadable: {exc}"]
            lines.append(f"{sid}: stored messages {kinds}")
            for name in sorted(self.platform.processes):
                said = [
                    line for line in self.platform.log(name, tail=None).splitlines() if sid in line
                ]
                lines += [f"  {name}: {line[:200]}" for line in said[-3:]]
        return "\n".join(lines)
