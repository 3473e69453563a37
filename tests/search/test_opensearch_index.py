"""OpenSearchIndex against a real OpenSearch: analysis, phrases, stems, tenants, upserts."""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.store import opensearch_url, require
from voxwire.search import SearchIndexError
from voxwire.search.opensearch import OpenSearchIndex
from voxwire_client.messages import SegmentData

pytestmark = pytest.mark.timeout(60)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

ACME = [
    "Good morning everyone, let's review the quarterly budget.",
    "The marketing team was running late on the campaign.",
    "Our café partners in Zürich signed the new contract.",
    "Next we'll discuss the hiring plan for engineers.",
]
GLOBEX = ["The quarterly budget of Globex is secret.", "Globex engineers are running tests."]


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


@pytest.fixture
async def filled(index: OpenSearchIndex) -> OpenSearchIndex:
    for i, text in enumerate(ACME):
        await index.index_segment("acme", "s-acme", _seg("s-acme", i, text), NOW, "en")
    for i, text in enumerate(GLOBEX):
        await index.index_segment("globex", "s-globex", _seg("s-globex", i, text), NOW)
    await index.refresh()
    return index


async def test_ensure_index_creates_the_versioned_index_behind_its_alias(
    index: OpenSearchIndex,
) -> None:
    assert index.index.endswith("-transcripts-v1")
    assert not await index.ensure_index()
    assert not any(await asyncio.gather(*(index.ensure_index() for _ in range(3))))
    client = index._client
    aliases = client.indices.get_alias(index=index.index)
    assert index.alias in aliases[index.index]["aliases"]
    mapping = client.indices.get_mapping(index=index.alias)[index.index]["mappings"]
    assert mapping["properties"]["segments"]["type"] == "nested"
    assert mapping["properties"]["segments"]["properties"]["text"]["fields"]["exact"]


async def test_the_analyzer_folds_stems_and_drops_stop_words(index: OpenSearchIndex) -> None:
    client = index._client

    def tokens(analyzer: str, text: str) -> list[str]:
        body = {"analyzer": analyzer, "text": text}
        return [t["token"] for t in client.indices.analyze(index=index.index, body=body)["tokens"]]

    assert tokens("vx_english", "The Cafés are Running") == ["cafe", "run"]
    assert tokens("vx_exact", "The Cafés are Running") == ["the", "cafes", "are", "running"]


async def test_stemmed_queries_find_the_segment_with_its_times(filled: OpenSearchIndex) -> None:
    hits = await filled.search("acme", "runs")
    assert [(h.sid, h.index, h.start_ms, h.end_ms) for h in hits] == [("s-acme", 1, 4000, 7500)]
    assert hits[0].text == ACME[1]
    assert hits[0].highlight == "The marketing team was <em>running</em> late on the campaign."
    assert hits[0].score > 0 and hits[0].segment_id == "s-acme-1"
    (hit,) = await filled.search("acme", "cafe zurich")  # accents folded
    assert (hit.index, hit.start_ms, hit.end_ms) == (2, 8000, 11500)
    assert await filled.search("acme", "budget engineer") == []  # all words, one segment


async def test_phrase_queries_match_word_for_word(filled: OpenSearchIndex) -> None:
    (hit,) = await filled.search("acme", '"review the quarterly budget"')
    assert (hit.sid, hit.index, hit.start_ms) == ("s-acme", 0, 0)
    assert "<em>quarterly</em> <em>budget</em>" in hit.highlight
    assert await filled.search("acme", '"review quarterly budget"') == []
    assert await filled.search("acme", '"quarterly budgets"') == []  # not stemmed


async def test_a_tenant_never_sees_another_tenants_segments(filled: OpenSearchIndex) -> None:
    for query in ("quarterly budget", '"quarterly budget"', "running", "engineers", "*", "globex"):
        assert all(h.sid == "s-acme" for h in await filled.search("acme", query)), query
        assert all(h.sid == "s-globex" for h in await filled.search("globex", query)), query
    assert {h.sid for h in await filled.search("globex", "budget")} == {"s-globex"}
    assert await filled.search("nobody", "budget") == []
    assert await filled.search("acme", "budget", sid="s-globex") == []


async def test_same_sid_in_two_tenants_stays_apart(index: OpenSearchIndex) -> None:
    await index.index_segment("acme", "shared", _seg("shared", 0, "alpha words"), NOW)
    await index.index_segment("globex", "shared", _seg("shared", 0, "beta words"), NOW)
    await index.refresh()
    assert [h.text for h in await index.search("acme", "words")] == ["alpha words"]
    assert [h.text for h in await index.search("globex", "words")] == ["beta words"]


async def test_reindexing_a_segment_does_not_duplicate_it(filled: OpenSearchIndex) -> None:
    segment = _seg("s-acme", 1, ACME[1])
    for _ in range(3):
        await filled.index_segment("acme", "s-acme", segment, NOW, "en")
    await asyncio.gather(
        *(filled.index_segment("acme", "s-acme", segment, NOW, "en") for _ in range(4))
    )
    await filled.refresh()
    assert len(await filled.search("acme", "marketing")) == 1
    doc = filled._client.get(index=filled.alias, id="acme:s-acme")["_source"]
    assert [s["index"] for s in doc["segments"]] == [0, 1, 2, 3]
    revised = _seg("s-acme", 1, "The sales team arrived early.")
    await filled.index_segment("acme", "s-acme", revised, NOW)
    await filled.refresh()
    assert await filled.search("acme", "marketing") == []
    (hit,) = await filled.search("acme", "sales")
    assert (hit.index, hit.start_ms) == (1, 4000)
    doc = filled._client.get(index=filled.alias, id="acme:s-acme")["_source"]
    assert doc["text"] == " ".join([ACME[0], revised.text, *ACME[2:]])
    assert doc["language"] == "en"


async def test_out_of_order_segments_are_kept_in_index_order(index: OpenSearchIndex) -> None:
    for i in (2, 0, 1):
        await index.index_segment("acme", "o1", _seg("o1", i, f"word{i}"), NOW)
    await index.refresh()
    doc = index._client.get(index=index.alias, id="acme:o1")["_source"]
    assert [s["index"] for s in doc["segments"]] == [0, 1, 2]
    assert doc["text"] == "word0 word1 word2"
    hits = await index.search("acme", "word0 | word1 | word2", sid="o1")
    assert sorted(h.index for h in hits) == [0, 1, 2]


async def test_an_empty_query_finds_nothing(filled: OpenSearchIndex) -> None:
    assert await filled.search("acme", "  ") == []


async def test_an_unreachable_cluster_raises_search_index_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    search = OpenSearchIndex.open(f"http://127.0.0.1:{port}", timeout=1)
    try:
        with pytest.raises(SearchIndexError, match="OpenSearch"):
            await search.search("acme", "budget")
    finally:
        await search.close()
