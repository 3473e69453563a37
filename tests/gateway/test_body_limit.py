"""Request bodies are capped (1 MiB) everywhere but the upload, which has its own limit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.store import SqliteStore


async def _key(store: SqliteStore) -> dict[str, str]:
    tenant = await store.create_tenant("acme")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "acme")
    return {"Authorization": f"Bearer {key.plaintext}"}


async def test_a_huge_json_body_is_refused_before_it_is_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.sqlite3")
    auth = await _key(store)
    huge = json.dumps({"q": "budget", "sids": ["s"] * 500_000}).encode()
    assert len(huge) > 2 * 1024 * 1024

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for i in range(0, len(huge), 65536):
            yield huge[i : i + 65536]

    async with gateway_client(tmp_path, store) as http:
        for content in (huge, streamed()):
            response = await http.post("/v1/search", content=content, headers=auth)
            assert response.status_code == 413
            assert response.json()["code"] == "payload_too_large"
        ok = await http.post("/v1/streams", json={"language": "en"}, headers=auth)
        assert ok.status_code == 201, ok.text
        # the upload is not capped by this (its own limit is max_upload_mb)
        files = {"file": ("noise.wav", b"\x01" * (2 * 1024 * 1024))}
        upload = await http.post("/v1/sessions", files=files, headers=auth)
        assert upload.status_code == 422, upload.text
