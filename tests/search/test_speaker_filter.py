"""The ``speaker`` filter on both search backends (SQLite FTS5 and a real
OpenSearch): segments stored with their diarization labels are found only for
their own speaker, hits say whose they are, words across segments count only
the speaker's own, and indexes made before speakers were indexed keep working."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.search.test_search_index import BACKENDS, _close, _open
from tests.store import opensearch_url, require
from voxwire.search import SearchIndex, SearchQuery
from voxwire.search.opensearch import OpenSearchIndex
from voxwire.search.opensearch_mapping import ADDED, MAPPINGS, TEXT_ANALYSIS
from voxwire.search.query import SearchHit
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.wire.windows import windows_of
from voxwire_client.messages import SegmentData

pytestmark = pytest.mark.timeout(120)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CALL = [
    ("S1", "Good morning, let's review the quarterly budget."),
    ("S2", "The budget for the warehouse is on track."),
    ("S1", "And so my fellow americans ask not"),
    ("S2", "mm-hm"),
    ("S1", "what your country can do for you"),
    ("S2", "I agree with the budget."),
]


def _seg(sid: str, index: int, text: str, speaker: str | None) -> SegmentData:
    return SegmentData(
        id=f"{sid}-{index}", index=index, start_ms=index * 4000, end_ms=index * 4000 + 3500,
        text=text, speaker=speaker,
    )  # fmt: skip


async def _fill_call(index: SearchIndex, sid: str = "s-call") -> list[SegmentData]:
    segments = [_seg(sid, i, text, speaker) for i, (speaker, text) in enumerate(CALL)]
    await index.index_segments("acme", sid, segments, NOW, "en")
    await index.index_windows("acme", sid, windows_of(segments, sid), NOW)
    await index.refresh()
    return segments


@pytest.fixture(params=BACKENDS)
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SearchIndex]:
    opened = await _open(request.param, tmp_path)
    yield opened
    await _close(opened)


async def _hits(index: SearchIndex, q: str, **filters: object) -> list[SearchHit]:
    page = await index.search("acme", SearchQuery.model_validate({"q": q, **filters}))
    return list(page.hits)


async def test_a_speaker_filter_finds_only_that_speakers_segments(index: SearchIndex) -> None:
    await _fill_call(index)
    everyone = await _hits(index, "budget", size=100)
    assert sorted(h.index for h in everyone) == [0, 1, 5]
    assert {h.index: h.speaker for h in everyone} == {0: "S1", 1: "S2", 5: "S2"}
    s2 = await _hits(index, "budget", speaker="S2", size=100)
    assert sorted(h.index for h in s2) == [1, 5] and {h.speaker for h in s2} == {"S2"}
    (s1,) = await _hits(index, "budget", speaker="S1")
    assert (s1.index, s1.speaker, s1.text) == (0, "S1", CALL[0][1])
    assert "<em>budget</em>" in s1.highlight
    assert await _hits(index, "budget", speaker="S3") == []
    # with the other filters
    assert await _hits(index, "budget", speaker="S2", start_ms=20_000, end_ms=21_000) != []
    assert await _hits(index, "budget", speaker="S2", end_ms=4000) == []
    assert await _hits(index, "budget", speaker="S1", sids=["other"]) == []


async def test_words_across_segments_count_only_the_speakers_own(index: SearchIndex) -> None:
    """S1 says "ask not" | S2 "mm-hm" | S1 "what your country": one hit of S1
    over S1's two segments; S2 said none of it."""
    segments = await _fill_call(index)
    q = '"ask not what your country"'
    (hit,) = await _hits(index, q, speaker="S1")
    assert hit.segment_ids == (segments[2].id, segments[4].id) and hit.speaker == "S1"
    assert hit.text == f"{CALL[2][1]} {CALL[4][1]}"
    assert (hit.start_ms, hit.end_ms) == (segments[2].start_ms, segments[4].end_ms)
    assert await _hits(index, q, speaker="S2") == []
    # without the filter the words are not one after the other (S2 between)
    assert await _hits(index, q) == []
    # words of two voices are one hit of nobody in particular, and none of either
    (both,) = await _hits(index, "warehouse americans")
    assert both.segment_ids == (segments[1].id, segments[2].id) and both.speaker is None
    assert await _hits(index, "warehouse americans", speaker="S1") == []


async def test_segments_without_speakers_are_found_only_without_the_filter(
    index: SearchIndex,
) -> None:
    plain = [_seg("s-plain", 0, "the quarterly budget", None)]
    await index.index_segments("acme", "s-plain", plain, NOW)
    await index.refresh()
    (hit,) = await _hits(index, "budget")
    assert hit.speaker is None
    assert await _hits(index, "budget", speaker="S1") == []


async def test_a_segment_indexed_again_with_another_speaker_moves(index: SearchIndex) -> None:
    await index.index_segments("acme", "s-x", [_seg("s-x", 0, "budget", "S1")], NOW)
    await index.index_segments("acme", "s-x", [_seg("s-x", 0, "budget", "S2")], NOW)
    await index.refresh()
    assert await _hits(index, "budget", speaker="S1") == []
    assert [h.speaker for h in await _hits(index, "budget", speaker="S2")] == ["S2"]


@pytest.mark.parametrize("bad", ["S1 ", "S1%", "1", "", "-agent", "x" * 25, "agent customer"])
def test_a_bad_speaker_label_is_refused_with_what_to_send(bad: str) -> None:
    with pytest.raises(ValidationError, match="speaker must be a label such as S1"):
        SearchQuery.model_validate({"q": "budget", "speaker": bad})
    assert SearchQuery(q="budget", speaker="S12").speaker == "S12"


async def test_an_sqlite_index_made_before_speakers_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "search.sqlite3"
    old = sqlite3.connect(path)  # the tables as the first files had them
    old.executescript(
        """
        CREATE TABLE sessions (tenant_id TEXT NOT NULL, sid TEXT NOT NULL,
            created_at TEXT NOT NULL, language TEXT, PRIMARY KEY (tenant_id, sid));
        CREATE TABLE segments (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL,
            sid TEXT NOT NULL, idx INTEGER NOT NULL, segment_id TEXT NOT NULL,
            start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, text TEXT NOT NULL,
            norm TEXT NOT NULL, UNIQUE (tenant_id, sid, idx));
        CREATE TABLE windows (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL,
            sid TEXT NOT NULL, idx INTEGER NOT NULL, start_ms INTEGER NOT NULL,
            end_ms INTEGER NOT NULL, segments TEXT NOT NULL, norm TEXT NOT NULL,
            UNIQUE (tenant_id, sid, idx));
        """
    )
    old.close()
    index = SqliteSearchIndex(path)
    await index.ensure_index()
    await _fill_call(index)
    assert len(await _hits(index, "budget", speaker="S2")) == 2
    (hit,) = await _hits(index, '"ask not what your country"', speaker="S1")
    assert hit.speaker == "S1"
    await index.close()


async def test_an_opensearch_index_of_the_previous_mapping_takes_speakers() -> None:
    """A version-3 index (no speaker fields, dynamic strict) behind the alias:
    opening it adds the fields in place, so segments with speakers are written
    and filtered at once."""
    require("opensearch")
    alias = f"vxtest-{secrets.token_hex(4)}-transcripts"
    index = OpenSearchIndex.open(opensearch_url(), alias=alias, replicas=0)
    old = {**MAPPINGS, "_meta": {"version": 3}, "properties": {**MAPPINGS["properties"]}}
    for field, added in ADDED["properties"].items():
        kept = dict(MAPPINGS["properties"][field]["properties"])
        for name in added["properties"]:
            kept.pop(name)
        old["properties"][field] = {**MAPPINGS["properties"][field], "properties": kept}
    body = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0, "analysis": TEXT_ANALYSIS},
        "mappings": old,
        "aliases": {alias: {}},
    }
    index._client.indices.create(index=f"{alias}-v3", body=body)
    try:
        assert not await index.ensure_index()
        await _fill_call(index)
        assert len(await _hits(index, "budget", speaker="S2")) == 2
        (hit,) = await _hits(index, '"ask not what your country"', speaker="S1")
        assert hit.speaker == "S1"
    finally:
        await index.drop_index()
        await index.close()
