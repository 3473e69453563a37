"""Distributed mode indexes every committed segment in OpenSearch, per tenant."""

from __future__ import annotations

import asyncio
import time

import pytest

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform
from voxwire.platform.choices import index_alias, open_postgres_store
from voxwire.search.opensearch import OpenSearchIndex
from voxwire_client import Client, SearchQuery

pytestmark = pytest.mark.timeout(300)


def test_committed_segments_are_indexed_for_search(cluster: DistributedPlatform) -> None:
    """Distributed mode indexes every final segment in OpenSearch, per tenant."""
    with Client(cluster.url, cluster.api_key, cluster.mqtt_url) as client:
        result = client.transcribe(EVAL_DIR / "audio" / "whisper_jfk.flac")
        tenant = client.session(result.sid)
    settings = cluster.settings

    async def search() -> list:
        index = OpenSearchIndex.open(settings.servers.opensearch_url, alias=index_alias(settings))
        try:
            tenant_id = await _tenant_of(cluster, result.sid)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                await index.refresh()
                query = SearchQuery(q="fellow americans", sids=(result.sid,))
                hits = list((await index.search(tenant_id, query)).hits)
                if hits:
                    return hits
                await asyncio.sleep(0.5)
            return []
        finally:
            await index.close()

    hits = asyncio.run(search())
    assert tenant.sid == result.sid
    assert hits and hits[0].sid == result.sid and hits[0].start_ms < 5000


async def _tenant_of(cluster: DistributedPlatform, sid: str) -> str:
    async with open_postgres_store(cluster.settings, "test") as store:
        session = await store.get_session(sid)
        assert session is not None
        return session.tenant_id
