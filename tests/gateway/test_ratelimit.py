"""Rate limits: the token bucket, and the gateway answering 429 to one tenant
while another goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.core.ratelimit import RateLimits
from voxwire.store import SqliteStore
from voxwire_client import AsyncClient


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_a_burst_then_the_rate() -> None:
    clock = Clock()
    limits = RateLimits(rate_per_s=2, burst=3, now=clock)
    assert [limits.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limits.take("a") == pytest.approx(0.5)
    assert limits.take("b") == 0.0  # another caller has a bucket of its own
    clock.now += 0.5
    assert limits.take("a") == 0.0
    assert limits.take("a") > 0
    clock.now += 60
    assert [limits.take("a") for _ in range(4)].count(0.0) == 3  # never more than the burst


def test_forgotten_callers_start_full() -> None:
    limits = RateLimits(rate_per_s=1, burst=1, max_callers=2, now=Clock())
    assert limits.take("a") == 0.0 and limits.take("a") > 0
    limits.take("b"), limits.take("c")  # "a" is pushed out
    assert limits.take("a") == 0.0


async def test_a_flooding_tenant_gets_429_and_its_neighbour_does_not(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    keys = {}
    for name in ("flood", "calm"):
        tenant = await store.create_tenant(name)
        key = generate_key()
        await store.add_api_key(tenant.id, key, name)
        keys[name] = {"Authorization": f"Bearer {key.plaintext}"}
    async with gateway_client(tmp_path, store, rate_limit_per_s=0.01, rate_limit_burst=5) as http:
        codes = [
            (await http.get("/v1/sessions", headers=keys["flood"])).status_code for _ in range(8)
        ]
        assert codes == [200] * 5 + [429] * 3
        refused = await http.get("/v1/sessions", headers=keys["flood"])
        assert refused.json()["code"] == "rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
        assert (await http.get("/v1/sessions", headers=keys["calm"])).status_code == 200
        metrics = (await http.get("/metrics")).text  # no key needed; counts only
        refused = [line for line in metrics.splitlines() if line.startswith("voxwire_http_rate")]
        assert refused and float(refused[0].split()[-1]) >= 4


async def test_the_sdk_waits_out_a_429_and_goes_on(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("busy")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "busy")
    before = REGISTRY.get_sample_value("voxwire_http_rate_limited_total") or 0.0
    async with gateway_client(tmp_path, store, rate_limit_per_s=4, rate_limit_burst=2) as http:
        http.headers["Authorization"] = f"Bearer {key.plaintext}"
        client = AsyncClient("http://gateway", key.plaintext, "mqtt://127.0.0.1:1")
        await client._http.aclose()
        client._http = http  # the SDK's requests go to the app in this process
        created = [await client.start_stream() for _ in range(5)]
    assert len({c.sid for c in created}) == 5
    assert (REGISTRY.get_sample_value("voxwire_http_rate_limited_total") or 0.0) > before
