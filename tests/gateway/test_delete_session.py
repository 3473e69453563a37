"""``DELETE /v1/sessions/{sid}`` on a real store: only its owner may, asking again
answers the same, and the session answers 404 everywhere afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.access.tokens import TokenIssuer
from voxwire.store import SessionRecord, SqliteStore
from voxwire_client.messages import (
    ProgressMessage,
    SegmentData,
    SessionStatus,
    TranscriptMessage,
)


@dataclass
class World:
    client: httpx.AsyncClient
    store: SqliteStore
    blobs: Path
    owner: dict[str, str]
    device: dict[str, str]
    other_device: dict[str, str]
    stranger: dict[str, str]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _session(world_store: SqliteStore, tenant_id: str, sid: str, key_id: str | None) -> None:
    await world_store.create_session(
        SessionRecord(
            sid=sid,
            tenant_id=tenant_id,
            status=SessionStatus.QUEUED,
            created_at=datetime.now(UTC),
            filename="call.wav",
            key_id=key_id,
        )
    )
    segment = SegmentData(id=f"{sid}-0", index=0, start_ms=0, end_ms=900, text="hello there")
    await world_store.record_messages(
        [
            TranscriptMessage(sid=sid, seq=2, text="hello there", duration_ms=900,
                              segments=(segment,)),
            ProgressMessage(sid=sid, seq=3, status=SessionStatus.COMPLETED, percent=100),
        ]
    )  # fmt: skip


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    store = SqliteStore(tmp_path / "store.sqlite3")
    acme, other = await store.create_tenant("acme"), await store.create_tenant("other")
    owner, device, other_device, stranger = (generate_key() for _ in range(4))
    await store.add_api_key(acme.id, owner, "app")
    await store.add_api_key(acme.id, device, "mic", "device")
    await store.add_api_key(acme.id, other_device, "mic-two", "device")
    await store.add_api_key(other.id, stranger, "theirs")
    await _session(store, acme.id, "s_call", None)
    await _session(store, acme.id, "s_mic", device.key_id)
    blobs = tmp_path / "blobs"
    for sid in ("s_call", "s_mic"):
        (blobs / sid).mkdir(parents=True)
        (blobs / sid / "original.wav").write_bytes(b"RIFF" * 16)
    async with gateway_client(tmp_path, store, TokenIssuer(b"t" * 32)) as client:
        yield World(
            client,
            store,
            blobs,
            _auth(owner.plaintext),
            _auth(device.plaintext),
            _auth(other_device.plaintext),
            _auth(stranger.plaintext),
        )
    await store.close()


async def test_only_the_owner_deletes_and_then_it_is_gone_everywhere(world: World) -> None:
    client = world.client
    for refused in (world.stranger, world.other_device):  # another tenant, another device
        answer = await client.delete("/v1/sessions/s_call", headers=refused)
        assert answer.status_code == 404, answer.text
        assert answer.json()["code"] == "not_found"
    assert (await client.get("/v1/sessions/s_call", headers=world.owner)).status_code == 200
    token = (
        await client.post("/v1/tokens", json={"sids": ["s_call"]}, headers=world.owner)
    ).json()["token"]
    assert (await client.delete("/v1/sessions/s_call", headers=_auth(token))).status_code == 401

    answer = await client.delete("/v1/sessions/s_call", headers=world.owner)
    assert answer.status_code == 204 and answer.content == b""
    assert not (world.blobs / "s_call").exists()
    for path in ("", "/transcript", "/messages", "/audio"):
        gone = await client.get(f"/v1/sessions/s_call{path}", headers=world.owner)
        assert gone.status_code == 404, (path, gone.text)
    assert (await client.get("/v1/sessions/s_call", headers=_auth(token))).status_code == 404
    again = await client.post("/v1/sessions/s_call/retranscribe", json={}, headers=world.owner)
    assert again.status_code == 404
    prompts = await client.post(
        "/v1/sessions/s_call/prompts", json={"add": ["x"]}, headers=world.owner
    )
    assert prompts.status_code == 404
    listed = (await client.get("/v1/sessions", headers=world.owner)).json()
    assert [s["sid"] for s in listed] == ["s_mic"]
    # asking again succeeds; another tenant still learns nothing
    assert (await client.delete("/v1/sessions/s_call", headers=world.owner)).status_code == 204
    assert (await client.delete("/v1/sessions/s_call", headers=world.stranger)).status_code == 404
    assert (await client.delete("/v1/sessions/s_none", headers=world.owner)).status_code == 404


async def test_a_device_key_deletes_the_sessions_it_opened(world: World) -> None:
    client = world.client
    assert (await client.delete("/v1/sessions/s_call", headers=world.device)).status_code == 404
    assert (await client.delete("/v1/sessions/s_mic", headers=world.device)).status_code == 204
    assert (await client.get("/v1/sessions/s_mic", headers=world.owner)).status_code == 404
    assert (await client.get("/v1/sessions/s_call", headers=world.owner)).status_code == 200


async def test_a_bad_sid_is_refused(world: World) -> None:
    answer = await world.client.delete("/v1/sessions/bad%2Bsid", headers=world.owner)
    assert answer.status_code in (400, 404, 422), answer.text
