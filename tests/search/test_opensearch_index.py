"""OpenSearchIndex against a real OpenSearch: its mapping, analyzers and document
upserts (what every backend does is in test_search_index.py)."""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.store import opensearch_url, require
from voxwire.search import SearchIndexError, SearchQuery
from voxwire.search.opensearch import VERSION, OpenSearchIndex
from voxwire_client.messages import SegmentData

pytestmark = pytest.mark.timeout(60)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _seg(sid: str, index: int, text: str) -> SegmentData:
    return SegmentData(
        id=f"{sid}-{index}",
        index=index,
        start_ms=index * 4000,
        end_ms=index * 4000 + 3500,
        text=text,
    )


@pytest.fixture
async def index() -> AsyncIterator[OpenSearchIndex]:
    require("opensearch")
    search = OpenSearchIndex.open(
        opensearch_url(), alias=f"vxtest-{secrets.token_hex(4)}-transcripts", replicas=0
    )
    assert await search.ensure_index()
    yield search
    await search.drop_index()
    await search.close()


async def test_ensure_index_creates_the_versioned_index_behind_its_alias(
    index: OpenSearchIndex,
) -> None:
    assert index.index.endswith(f"-transcripts-v{VERSION}")
    assert not await index.ensure_index()
    assert not any(await asyncio.gather(*(index.ensure_index() for _ in range(3))))
    client = index._client
    aliases = client.indices.get_alias(index=index.index)
    assert index.alias in aliases[index.index]["aliases"]
    mapping = client.indices.get_mapping(index=index.alias)[index.index]["mappings"]
    assert mapping["properties"]["segments"]["type"] == "nested"
    assert mapping["properties"]["segments"]["properties"]["text"]["fields"]["exact"]
    assert mapping["properties"]["segments"]["properties"]["norm"]["analyzer"] == "vx_norm"


async def test_the_analyzer_folds_stems_and_drops_stop_words(index: OpenSearchIndex) -> None:
    client = index._client

    def tokens(analyzer: str, text: str) -> list[str]:
        body = {"analyzer": analyzer, "text": text}
        return [t["token"] for t in client.indices.analyze(index=index.index, body=body)["tokens"]]

    assert tokens("vx_english", "The Cafés are Running") == ["cafe", "run"]
    assert tokens("vx_exact", "The Cafés are Running") == ["the", "cafes", "are", "running"]
    assert tokens("vx_norm", "the cafes are running 3.5") == ["the", "cafe", "ar", "run", "3.5"]


async def test_out_of_order_segments_are_kept_in_index_order(index: OpenSearchIndex) -> None:
    for i in (2, 0, 1):
        await index.index_segments("acme", "o1", [_seg("o1", i, f"word{i}")], NOW)
    await index.refresh()
    doc = index._client.get(index=index.alias, id="acme:o1")["_source"]
    assert [s["index"] for s in doc["segments"]] == [0, 1, 2]
    assert doc["text"] == "word0 word1 word2"
    page = await index.search("acme", SearchQuery(q="word0", sids=("o1",)))
    assert [h.index for h in page.hits] == [0]


async def test_an_unreachable_cluster_raises_search_index_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    search = OpenSearchIndex.open(f"http://127.0.0.1:{port}", timeout=1)
    try:
        with pytest.raises(SearchIndexError, match="OpenSearch"):
            await search.search("acme", SearchQuery(q="budget"))
    finally:
        await search.close()


async def test_a_rebuild_moves_the_alias_in_one_step_and_deletes_the_old_index(
    index: OpenSearchIndex,
) -> None:
    client = index._client
    old = index.index
    await index.index_segments("acme", "s1", [_seg("s1", 0, "old words")], NOW)
    await index.refresh()
    async with index.rebuild() as fresh:
        await fresh.index_segments("acme", "s2", [_seg("s2", 0, "new words")], NOW)
        page = await index.search("acme", SearchQuery(q="words"))
        assert [h.sid for h in page.hits] == ["s1"]  # searches use the old index meanwhile
    (behind,) = client.indices.get_alias(name=index.alias)
    assert behind != old and behind.startswith(f"{index.alias}-v{VERSION}-")
    assert not client.indices.exists(index=old)
    page = await index.search("acme", SearchQuery(q="words"))
    assert [h.sid for h in page.hits] == ["s2"]


async def test_a_failed_rebuild_leaves_the_index_as_it_was(index: OpenSearchIndex) -> None:
    await index.index_segments("acme", "s1", [_seg("s1", 0, "old words")], NOW)
    await index.refresh()

    async def interrupted() -> None:
        async with index.rebuild() as fresh:
            await fresh.index_segments("acme", "s2", [_seg("s2", 0, "new words")], NOW)
            raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        await interrupted()
    assert list(index._client.indices.get_alias(name=index.alias)) == [index.index]
    assert len(index._client.indices.get(index=f"{index.alias}-*")) == 1
    page = await index.search("acme", SearchQuery(q="words"))
    assert [h.sid for h in page.hits] == ["s1"]
