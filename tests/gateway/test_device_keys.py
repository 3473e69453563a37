"""Device keys over HTTP and the EMQX hooks, on a real store: a device key opens
sessions (live streams, uploads) and reaches the sessions it opened, and nothing
else of its tenant; anything else is answered 403 saying what a device key may do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from evaluation.corpus import EVAL_DIR
from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.access.tokens import TokenIssuer
from voxwire.store import SqliteStore

HOOK = "hook-secret-for-tests"
EMQX = {"Authorization": f"Bearer {HOOK}"}


@dataclass
class Keys:
    tenant: str
    one: str
    two: str
    one_id: str
    two_id: str


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Keys, SqliteStore]]:
    store = SqliteStore(tmp_path / "store.sqlite3")
    acme = await store.create_tenant("acme")
    tenant, one, two = generate_key(), generate_key(), generate_key()
    await store.add_api_key(acme.id, tenant, "app")
    await store.add_api_key(acme.id, one, "mic-one", "device")
    await store.add_api_key(acme.id, two, "mic-two", "device")
    keys = Keys(tenant.plaintext, one.plaintext, two.plaintext, one.key_id, two.key_id)
    hooks = {"hook_secret": SecretStr(HOOK), "mqtt_password": SecretStr("service")}
    async with gateway_client(tmp_path, store, TokenIssuer(b"t" * 32), **hooks) as client:
        yield client, keys, store
    await store.close()


async def _authz(client: httpx.AsyncClient, username: str, topic: str, action: str) -> str:
    body = {"clientid": "c1", "username": username, "topic": topic, "action": action}
    response = await client.post("/internal/emqx/authz", json=body, headers=EMQX)
    assert response.status_code == 200
    return str(response.json()["result"])


async def test_a_device_key_opens_a_stream_and_reads_only_its_own_sessions(
    gateway: tuple[httpx.AsyncClient, Keys, SqliteStore],
) -> None:
    client, keys, store = gateway
    opened = await client.post("/v1/streams", json={}, headers=_auth(keys.one))
    assert opened.status_code == 201, opened.text
    sid = opened.json()["sid"]
    session = await store.get_session(sid)
    assert session is not None and session.key_id == keys.one_id  # who opened it
    for path in (f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/transcript"):
        assert (await client.get(path, headers=_auth(keys.one))).status_code == 200, path
        assert (await client.get(path, headers=_auth(keys.tenant))).status_code == 200, path
        other = await client.get(path, headers=_auth(keys.two))
        assert other.status_code == 404, path
        assert "device key" in other.json()["message"]
    change = {"add": [{"id": "p1", "text": "hello"}]}
    changed = await client.post(f"/v1/sessions/{sid}/prompts", json=change, headers=_auth(keys.one))
    assert changed.status_code == 202, changed.text
    refused = await client.post(f"/v1/sessions/{sid}/prompts", json=change, headers=_auth(keys.two))
    assert refused.status_code == 404

    # a file a device uploads is its session too
    wav = (EVAL_DIR / "audio" / "lhotse_lj_LJ002-0020.wav").read_bytes()
    files = {"file": ("a.wav", wav)}
    uploaded = await client.post("/v1/sessions", files=files, headers=_auth(keys.one))
    assert uploaded.status_code == 201, uploaded.text
    upload_sid = uploaded.json()["sid"]
    stored = await store.get_session(upload_sid)
    assert stored is not None and stored.key_id == keys.one_id
    assert (
        await client.get(f"/v1/sessions/{upload_sid}", headers=_auth(keys.two))
    ).status_code == 404

    # a session the tenant key opened is not a device's either
    app_sid = (await client.post("/v1/streams", json={}, headers=_auth(keys.tenant))).json()["sid"]
    assert (await client.get(f"/v1/sessions/{app_sid}", headers=_auth(keys.one))).status_code == 404


async def test_a_device_key_may_do_nothing_else_and_is_told_so(
    gateway: tuple[httpx.AsyncClient, Keys, SqliteStore],
) -> None:
    client, keys, _ = gateway
    sid = (await client.post("/v1/streams", json={}, headers=_auth(keys.one))).json()["sid"]
    for method, path, kwargs in (
        ("POST", "/v1/search", {"json": {"q": "hello"}}),
        ("GET", "/v1/sessions", {}),
        ("POST", "/v1/tokens", {"json": {"sids": [sid]}}),
    ):
        response = await client.request(method, path, headers=_auth(keys.one), **kwargs)
        assert response.status_code == 403, (path, response.text)
        body = response.json()
        assert body["code"] == "forbidden", path
        assert f"{method} {path} is not allowed with a device key" in body["message"]
        assert "may only open sessions" in body["message"] and "--device" in body["hint"]
        allowed = await client.request(method, path, headers=_auth(keys.tenant), **kwargs)
        assert allowed.status_code != 403, path


async def test_a_revoked_device_key_is_refused(
    gateway: tuple[httpx.AsyncClient, Keys, SqliteStore],
) -> None:
    client, keys, store = gateway
    assert await store.revoke_api_key(keys.one_id)
    response = await client.post("/v1/streams", json={}, headers=_auth(keys.one))
    assert response.status_code == 401
    assert await _authz(client, keys.one_id, f"query/{keys.one_id}/q1/request", "publish") == (
        "deny"
    )


async def test_emqx_lets_a_device_key_reach_only_the_sessions_it_opened(
    gateway: tuple[httpx.AsyncClient, Keys, SqliteStore],
) -> None:
    client, keys, _ = gateway
    mine = (await client.post("/v1/streams", json={}, headers=_auth(keys.one))).json()["sid"]
    theirs = (await client.post("/v1/streams", json={}, headers=_auth(keys.two))).json()["sid"]
    one, two = keys.one_id, keys.two_id
    body = {"clientid": "c1", "username": one, "password": keys.one}
    authn = await client.post("/internal/emqx/authn", json=body, headers=EMQX)
    assert authn.json() == {"result": "allow", "is_superuser": False}
    assert await _authz(client, one, f"transcription/{mine}/+", "subscribe") == "allow"
    assert await _authz(client, one, f"audio/{mine}/chunk/0", "publish") == "allow"
    assert await _authz(client, one, f"query/{one}/q1/request", "publish") == "allow"
    for topic, action in (
        (f"transcription/{theirs}/+", "subscribe"),
        (f"audio/{theirs}/control", "publish"),
        (f"query/{two}/q1/result", "subscribe"),
    ):
        assert await _authz(client, one, topic, action) == "deny", topic
    assert await _authz(client, two, f"transcription/{theirs}/+", "subscribe") == "allow"
