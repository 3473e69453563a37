"""The gateway's EMQX authentication and authorization routes, called with the
request bodies emqx/emqx.conf makes EMQX send, against a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.access.rules import SERVICE_USER
from voxwire.access.tokens import TokenIssuer
from voxwire.store import SessionRecord, SqliteStore
from voxwire_client.messages import SessionStatus

HOOK = "hook-secret-for-tests"
SERVICE = "service-password"
EMQX = {"Authorization": f"Bearer {HOOK}"}
CONF = Path(__file__).resolve().parents[2] / "emqx" / "emqx.conf"


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    store = SqliteStore(tmp_path / "store.sqlite3")
    alice, bob = await store.create_tenant("alice"), await store.create_tenant("bob")
    keys = {}
    for tenant, name in ((alice, "alice"), (bob, "bob")):
        key = generate_key()
        await store.add_api_key(tenant.id, key, name)
        keys[name], keys[f"{name}_id"] = key.plaintext, key.key_id
    for sid, tenant in (("s_alice", alice), ("s_bob", bob)):
        await store.create_session(
            SessionRecord(sid=sid, tenant_id=tenant.id, status=SessionStatus.QUEUED,
                          created_at=datetime.now(UTC))
        )  # fmt: skip
    tokens = TokenIssuer(b"t" * 32)
    keys["token"] = tokens.issue(alice.id, ["s_alice"], 600).token
    hooks = {"hook_secret": SecretStr(HOOK), "mqtt_password": SecretStr(SERVICE)}
    async with gateway_client(tmp_path, store, tokens, **hooks) as client:
        yield client, keys


async def _authn(client: httpx.AsyncClient, username: str, password: str) -> dict[str, object]:
    body = {"clientid": "c1", "username": username, "password": password, "peerhost": "10.0.0.7"}
    response = await client.post("/internal/emqx/authn", json=body, headers=EMQX)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    return dict(response.json())


async def _authz(client: httpx.AsyncClient, username: str, topic: str, action: str) -> str:
    body = {"clientid": "c1", "username": username, "topic": topic, "action": action}
    response = await client.post("/internal/emqx/authz", json=body, headers=EMQX)
    assert response.status_code == 200
    return str(response.json()["result"])


async def test_connections_are_allowed_only_with_valid_credentials(hooks: tuple) -> None:
    client, keys = hooks
    assert await _authn(client, keys["alice_id"], keys["alice"]) == {
        "result": "allow", "is_superuser": False,
    }  # fmt: skip
    assert await _authn(client, SERVICE_USER, SERVICE) == {"result": "allow", "is_superuser": True}
    for username, password in (
        (keys["bob_id"], keys["alice"]),  # a key under another key's id
        ("anyone", keys["alice"]),
        (keys["alice_id"], "vxk_nothing"),
        (SERVICE_USER, "wrong"),
        ("anonymous", ""),
    ):
        assert (await _authn(client, username, password))["result"] == "deny", username


async def test_a_token_gets_exactly_its_sessions_acl_and_an_expiry(hooks: tuple) -> None:
    client, keys = hooks
    answer = await _authn(client, "tok-browser", keys["token"])
    assert answer["result"] == "allow" and answer["is_superuser"] is False
    assert isinstance(answer["expire_at"], int)
    assert answer["acl"] == [
        {"permission": "allow", "action": "subscribe", "topic": "transcription/s_alice/+"},
        {"permission": "allow", "action": "publish", "topic": "audio/s_alice/chunk/+"},
        {"permission": "allow", "action": "publish", "topic": "audio/s_alice/control"},
        {"permission": "deny", "action": "all", "topic": "#"},
    ]
    forged = keys["token"][:-3] + "abc"
    assert (await _authn(client, "tok-browser", forged))["result"] == "deny"


async def test_a_key_reaches_only_its_tenants_sessions_and_its_queries(hooks: tuple) -> None:
    client, keys = hooks
    alice = keys["alice_id"]
    assert await _authz(client, alice, "transcription/s_alice/+", "subscribe") == "allow"
    assert await _authz(client, alice, "audio/s_alice/chunk/0", "publish") == "allow"
    assert await _authz(client, alice, f"query/{alice}/q1/request", "publish") == "allow"
    for topic, action in (
        ("transcription/s_bob/+", "subscribe"),
        ("audio/s_bob/chunk/0", "publish"),
        ("transcription/#", "subscribe"),
        ("transcription/s_alice/result", "publish"),
        (f"query/{keys['bob_id']}/q1/result", "subscribe"),
        ("audio/../s_bob/chunk/0", "publish"),
    ):
        assert await _authz(client, alice, topic, action) == "deny", topic
    assert await _authz(client, "nobody", "transcription/s_alice/+", "subscribe") == "deny"


async def test_only_emqx_may_ask(hooks: tuple) -> None:
    client, keys = hooks
    body = {"clientid": "c", "username": keys["alice_id"], "password": keys["alice"]}
    for headers in ({}, {"Authorization": "Bearer guess"}):
        response = await client.post("/internal/emqx/authn", json=body, headers=headers)
        assert response.status_code == 401


def test_the_shipped_emqx_config_sends_what_the_routes_read() -> None:
    conf = CONF.read_text()
    for placeholder in ("${clientid}", "${username}", "${password}", "${topic}", "${action}"):
        assert placeholder in conf
    assert "/internal/emqx/authn" in conf and "/internal/emqx/authz" in conf
    assert "no_match = deny" in conf
