"""Both search backends, SQLite FTS5 and a real OpenSearch, on the same data and
queries: the labelled eval queries, filters, paging, tenants and hostile input."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.search.corpus import labelled_queries, sessions
from tests.store import opensearch_url, require
from voxwire.search import SearchIndex, SearchQuery, SearchQueryError
from voxwire.search.opensearch import OpenSearchIndex
from voxwire.search.query import SearchHit, parse_query
from voxwire.search.reindex import reindex
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.store import SessionRecord, SqliteStore
from voxwire.wire.windows import windows_of
from voxwire_client.messages import SegmentData, SegmentMessage, SessionStatus

pytestmark = pytest.mark.timeout(120)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ACME = [
    "Good morning everyone, let's review the quarterly budget.",
    "The marketing team was running late on the campaign.",
    "Our café partners in Zürich signed the new contract.",
    "Next we'll discuss the hiring plan for engineers.",
]
GLOBEX = ["The quarterly budget of Globex is secret.", "Globex engineers are running tests."]
BACKENDS = ["sqlite", "opensearch"]


async def _open(backend: str, tmp_path: Path) -> SearchIndex:
    if backend == "sqlite":
        index: SearchIndex = SqliteSearchIndex(tmp_path / f"search-{secrets.token_hex(3)}.db")
    else:
        require("opensearch")
        alias = f"vxtest-{secrets.token_hex(4)}-transcripts"
        index = OpenSearchIndex.open(opensearch_url(), alias=alias, replicas=0)
    assert await index.ensure_index()
    return index


async def _close(index: SearchIndex) -> None:
    if isinstance(index, OpenSearchIndex):
        await index.drop_index()
    await index.close()


@pytest.fixture(params=BACKENDS)
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SearchIndex]:
    opened = await _open(request.param, tmp_path)
    yield opened
    await _close(opened)


def _seg(sid: str, index: int, text: str) -> SegmentData:
    return SegmentData(
        id=f"{sid}-{index}", index=index, start_ms=index * 4000, end_ms=index * 4000 + 3500,
        text=text,
    )  # fmt: skip


async def _fill_meetings(index: SearchIndex) -> None:
    segments = [_seg("s-acme", i, t) for i, t in enumerate(ACME)]
    await index.index_segments("acme", "s-acme", segments, NOW, "en")
    segments = [_seg("s-globex", i, t) for i, t in enumerate(GLOBEX)]
    await index.index_segments("globex", "s-globex", segments, NOW + timedelta(days=1), "de")
    await index.refresh()


async def _fill_eval(index: SearchIndex) -> None:
    for session in sessions():
        await index.index_segments("eval", session.sid, session.segments, session.created_at)
        windows = windows_of(session.segments, session.sid)
        await index.index_windows("eval", session.sid, windows, session.created_at)
    await index.refresh()


def _span(hit: SearchHit) -> tuple[str, int, int]:
    return hit.sid, hit.index, hit.index + len(hit.segment_ids) - 1


async def _hits(index: SearchIndex, tenant: str, q: str, **filters: object) -> list[SearchHit]:
    page = await index.search(tenant, SearchQuery.model_validate({"q": q, **filters}))
    return list(page.hits)


@pytest.fixture
async def meetings(index: SearchIndex) -> SearchIndex:
    await _fill_meetings(index)
    return index


# -- the labelled eval queries --------------------------------------------------------------------


async def test_every_labelled_span_is_in_the_top_3_and_absent_phrases_find_nothing(
    index: SearchIndex,
) -> None:
    await _fill_eval(index)
    by_sid = {s.sid: s.eval_id for s in sessions()}
    for labelled in labelled_queries():
        hits = await _hits(index, "eval", labelled.q, fuzzy=labelled.fuzzy, size=3)
        found = [(by_sid[h.sid], h.index, h.index + len(h.segment_ids) - 1) for h in hits]
        if not labelled.expect:
            assert found == [], labelled.q
        for expected in labelled.expect:
            assert expected in found, f"{labelled.q!r}: {expected} not in {found}"


async def test_both_backends_find_the_same_segments(tmp_path: Path) -> None:
    indexes = [await _open(backend, tmp_path) for backend in BACKENDS]
    try:
        for index in indexes:
            await _fill_eval(index)
        for labelled in labelled_queries():
            found = [
                {_span(h) for h in await _hits(i, "eval", labelled.q, fuzzy=labelled.fuzzy)}
                for i in indexes
            ]
            assert found[0] == found[1], labelled.q
    finally:
        for index in indexes:
            await _close(index)


# -- words, phrases, highlights --------------------------------------------------------------------


async def test_words_are_stemmed_folded_and_all_required(meetings: SearchIndex) -> None:
    (hit,) = await _hits(meetings, "acme", "runs")
    assert (hit.sid, hit.index, hit.start_ms, hit.end_ms) == ("s-acme", 1, 4000, 7500)
    assert hit.text == ACME[1] and hit.segment_id == "s-acme-1" and hit.score > 0
    assert hit.highlight == "The marketing team was <em>running</em> late on the campaign."
    (hit,) = await _hits(meetings, "acme", "CAFE zurich")
    assert hit.index == 2
    assert hit.highlight == "Our <em>café</em> partners in <em>Zürich</em> signed the new contract."
    assert await _hits(meetings, "acme", "budget engineer") == []  # one segment has them all


async def test_phrases_keep_word_order(meetings: SearchIndex) -> None:
    (hit,) = await _hits(meetings, "acme", '"review the quarterly budget"')
    assert hit.index == 0
    assert "<em>quarterly</em> <em>budget</em>" in hit.highlight
    assert await _hits(meetings, "acme", '"budget quarterly"') == []
    assert await _hits(meetings, "acme", '"review quarterly budget"') == []


async def test_highlights_are_escaped_html(index: SearchIndex) -> None:
    text = "<script>alert(1)</script> budget & plans"
    await index.index_segments("acme", "s-x", [_seg("s-x", 0, text)], NOW)
    await index.refresh()
    (hit,) = await _hits(index, "acme", "budget")
    assert hit.highlight == "&lt;script&gt;alert(1)&lt;/script&gt; <em>budget</em> &amp; plans"


# -- filters and pages ----------------------------------------------------------------------------


async def test_filters_narrow_the_segments_searched(meetings: SearchIndex) -> None:
    await meetings.index_segments("acme", "s-acme-2", [_seg("s-acme-2", 0, ACME[0])], NOW, "fr")
    await meetings.refresh()
    both = {h.sid for h in await _hits(meetings, "acme", "budget")}
    assert both == {"s-acme", "s-acme-2"}
    assert {h.sid for h in await _hits(meetings, "acme", "budget", sids=["s-acme-2"])} == {
        "s-acme-2"
    }
    assert {h.sid for h in await _hits(meetings, "acme", "budget", language="fr")} == {"s-acme-2"}
    assert await _hits(meetings, "acme", "budget", created_from=NOW + timedelta(seconds=1)) == []
    assert len(await _hits(meetings, "acme", "budget", created_to=NOW + timedelta(1))) == 2
    # time within the audio: segment 1 spans 4000-7500 ms
    assert [h.index for h in await _hits(meetings, "acme", "the", sids=["s-acme"])] != []
    window = await _hits(meetings, "acme", "the", sids=["s-acme"], start_ms=4500, end_ms=8100)
    assert sorted(h.index for h in window) == [1, 2]
    assert await _hits(meetings, "acme", "campaign", start_ms=7500) == []


async def test_pages_walk_through_every_hit_once(index: SearchIndex) -> None:
    segments = [_seg("s-many", i, f"report number {i} on the budget") for i in range(25)]
    await index.index_segments("acme", "s-many", segments, NOW)
    await index.refresh()
    seen: list[int] = []
    offset = 0
    while True:
        page = await index.search("acme", SearchQuery(q="budget report", size=10, offset=offset))
        seen += [h.index for h in page.hits]
        if not page.more:
            break
        offset += page.size
    assert sorted(seen) == list(range(25))
    assert len(seen) == 25


# -- tenants, updates -----------------------------------------------------------------------------


async def test_a_tenant_never_sees_another_tenants_segments(meetings: SearchIndex) -> None:
    for q in ("quarterly budget", '"quarterly budget"', "running", "engineers", "globex"):
        assert all(h.sid == "s-acme" for h in await _hits(meetings, "acme", q)), q
        assert all(h.sid == "s-globex" for h in await _hits(meetings, "globex", q)), q
    assert {h.sid for h in await _hits(meetings, "globex", "budget")} == {"s-globex"}
    assert await _hits(meetings, "nobody", "budget") == []
    assert await _hits(meetings, "acme", "budget", sids=["s-globex"]) == []


async def test_same_sid_in_two_tenants_stays_apart(index: SearchIndex) -> None:
    await index.index_segments("acme", "shared", [_seg("shared", 0, "alpha words")], NOW)
    await index.index_segments("globex", "shared", [_seg("shared", 0, "beta words")], NOW)
    await index.refresh()
    assert [h.text for h in await _hits(index, "acme", "words")] == ["alpha words"]
    assert [h.text for h in await _hits(index, "globex", "words")] == ["beta words"]


async def test_indexing_a_segment_again_replaces_it(meetings: SearchIndex) -> None:
    for _ in range(3):
        await meetings.index_segments("acme", "s-acme", [_seg("s-acme", 1, ACME[1])], NOW, "en")
    await meetings.refresh()
    assert len(await _hits(meetings, "acme", "marketing")) == 1
    revised = _seg("s-acme", 1, "The sales team arrived early.")
    await meetings.index_segments("acme", "s-acme", [revised], NOW)
    await meetings.refresh()
    assert await _hits(meetings, "acme", "marketing") == []
    (hit,) = await _hits(meetings, "acme", "sales")
    assert (hit.index, hit.start_ms) == (1, 4000)
    assert len(await _hits(meetings, "acme", "the", sids=["s-acme"], size=100)) == 4


# -- words said across segments (windows) ---------------------------------------------------------

SPLIT = ["and so my fellow americans ask not", "what your country can do for you", "it was",
         "twenty", "five percent of the vote"]  # fmt: skip


async def _fill_split(index: SearchIndex, tenant: str = "acme", *, windows: bool = True) -> None:
    segments = [_seg("s-split", i, t) for i, t in enumerate(SPLIT)]
    await index.index_segments(tenant, "s-split", segments, NOW, "en")
    if windows:
        await index.index_windows(tenant, "s-split", windows_of(segments, "s-split"), NOW)
    await index.refresh()


async def test_a_phrase_said_across_two_segments_is_one_hit_over_both(index: SearchIndex) -> None:
    await _fill_split(index)
    (hit,) = await _hits(index, "acme", '"ask not what your country"')
    assert hit.segment_ids == ("s-split-0", "s-split-1")
    assert (hit.segment_id, hit.index, hit.start_ms, hit.end_ms) == ("s-split-0", 0, 0, 7500)
    assert hit.text == f"{SPLIT[0]} {SPLIT[1]}"
    assert "<em>ask</em> <em>not</em> <em>what</em> <em>your</em> <em>country</em>" in (
        hit.highlight
    )
    # a number said across the boundary is one number
    (hit,) = await _hits(index, "acme", "25%")
    assert hit.segment_ids == ("s-split-3", "s-split-4")
    # the words of a query may also fall in neighbouring segments
    (hit,) = await _hits(index, "acme", "americans country")
    assert hit.segment_ids == ("s-split-0", "s-split-1")


async def test_what_one_segment_answers_is_not_reported_again_from_a_window(
    index: SearchIndex,
) -> None:
    await _fill_split(index)
    hits = await _hits(index, "acme", '"country can do"', size=100)
    assert [h.segment_ids for h in hits] == [("s-split-1",)]
    hits = await _hits(index, "acme", '"can do"', fuzzy=True, size=100)
    assert [h.segment_ids for h in hits] == [("s-split-1",)]


async def test_words_across_segments_need_the_windows_indexed(index: SearchIndex) -> None:
    await _fill_split(index, windows=False)
    assert await _hits(index, "acme", '"ask not what your country"') == []


async def test_spanning_hits_keep_to_the_filters_and_the_tenant(index: SearchIndex) -> None:
    await _fill_split(index)
    q = '"ask not what your country"'
    assert len(await _hits(index, "acme", q, start_ms=7000)) == 1
    assert await _hits(index, "acme", q, start_ms=7500) == []
    assert await _hits(index, "acme", q, end_ms=1) != []
    assert await _hits(index, "acme", q, sids=["other"]) == []
    assert await _hits(index, "globex", q) == []


async def test_a_window_sent_again_replaces_its_earlier_version(index: SearchIndex) -> None:
    segments = [_seg("s-split", i, t) for i, t in enumerate(SPLIT[:2])]
    await index.index_segments("acme", "s-split", segments, NOW)
    first = windows_of([segments[0], _seg("s-split", 1, "whatever comes")], "s-split")
    await index.index_windows("acme", "s-split", first, NOW)
    await index.index_windows("acme", "s-split", windows_of(segments, "s-split"), NOW)
    await index.refresh()
    assert await _hits(index, "acme", '"not whatever"') == []
    assert len(await _hits(index, "acme", '"not what your"')) == 1


# -- rebuilding ----------------------------------------------------------------------------------


async def _store_with_meetings(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(tmp_path / f"store-{secrets.token_hex(3)}.sqlite3")
    for name, sid, texts in (("acme", "s-acme", ACME), ("globex", "s-globex", GLOBEX)):
        tenant = await store.create_tenant(name)
        await store.create_session(
            SessionRecord(sid=sid, tenant_id=tenant.id, status=SessionStatus.QUEUED, created_at=NOW)
        )
        finals = [
            SegmentMessage(sid=sid, seq=i + 1, type="final", segment=_seg(sid, i, text))
            for i, text in enumerate(texts)
        ]
        await store.record_messages(list(finals))
    return store


async def test_reindex_rebuilds_from_the_store_and_swaps(
    index: SearchIndex, tmp_path: Path
) -> None:
    """What the index holds but the store does not (a stale segment) is gone
    after the rebuild; every stored segment is found; a segment indexed into
    the old index while the rebuild ran is still there afterwards."""
    store = await _store_with_meetings(tmp_path)
    acme = (await store.tenant_by_name("acme")).id  # type: ignore[union-attr]
    await index.index_segments(acme, "s-stale", [_seg("s-stale", 0, "stale budget")], NOW)
    assert isinstance(index, SqliteSearchIndex | OpenSearchIndex)
    progress: list[tuple[int, int]] = []
    rebuild = index.rebuild

    @contextlib.asynccontextmanager
    async def rebuild_meanwhile_indexing() -> AsyncIterator[object]:
        async with rebuild() as fresh:
            yield fresh
            late = _seg("s-acme", 9, "a late budget segment")
            await store.record_messages(
                [SegmentMessage(sid="s-acme", seq=99, type="final", segment=late)]
            )
            await index.index_segments(acme, "s-acme", [late], NOW)  # the old index

    index.rebuild = rebuild_meanwhile_indexing  # type: ignore[method-assign,assignment]
    report = await reindex(store, index, lambda done, total: progress.append((done, total)))
    await index.refresh()
    assert (report.sessions, report.segments) == (2, 6)
    assert progress[-1] == (4, 4)
    budget = await _hits(index, acme, "budget", size=100)
    assert sorted((h.sid, h.index) for h in budget) == [("s-acme", 0), ("s-acme", 9)]
    assert len(await _hits(index, acme, "the", size=100)) == 4
    await store.close()


# -- hostile queries ------------------------------------------------------------------------------

HOSTILE_AS_TEXT = [
    'budget" OR "engineers',  # an unbalanced quote
    "budget AND NOT engineers",
    "budget NEAR(quarterly engineers)",
    "text:budget",  # a column filter in FTS5, a field in query_string
    "budget*",
    "budget^10",
    '{"match_all": {}} budget',
    "(budget",
    "budget\x00",
    "bud\u200bget budget",  # a zero-width space
    "-engineers budget",
]


@pytest.mark.parametrize("q", HOSTILE_AS_TEXT)
async def test_query_syntax_is_searched_as_text(meetings: SearchIndex, q: str) -> None:
    hits = await _hits(meetings, "acme", q)
    assert all(h.sid == "s-acme" for h in hits)
    assert all("budget" in h.text.lower() for h in hits)


@pytest.mark.parametrize("q", ["*", '""', "&&& ||| !!!", " ", "\x00", "'"])
async def test_a_query_without_words_is_a_clear_error(meetings: SearchIndex, q: str) -> None:
    with pytest.raises(SearchQueryError, match="no words"):
        await _hits(meetings, "acme", q)


def test_oversized_and_malformed_queries_are_refused_before_searching() -> None:
    for bad in (
        {"q": "budget " * 200},  # over 500 characters
        {"q": ""},
        {"q": "budget", "size": 0},
        {"q": "budget", "size": 10_000},
        {"q": "budget", "offset": -1},
        {"q": "budget", "sids": ["../etc/passwd"]},
        {"q": "budget", "sids": ["a/+/#"]},
        {"q": "budget", "start_ms": 5000, "end_ms": 1000},
        {"q": "budget", "language": "en; DROP TABLE"},
        {"q": "budget", "script": "ctx._source"},
    ):
        with pytest.raises(ValidationError):
            SearchQuery.model_validate(bad)
    with pytest.raises(SearchQueryError, match="at most 32"):
        parse_query(" ".join(f"w{i}" for i in range(40)))


async def test_a_sqlite_index_follows_a_rebuild_made_by_another_process(tmp_path: Path) -> None:
    """``voxwire search reindex`` replaces the file under a running platform: the
    platform's next search reads the new file, not the one it opened."""
    running = SqliteSearchIndex(tmp_path / "search.sqlite3")
    await running.ensure_index()
    await running.index_segments("acme", "s-old", [_seg("s-old", 0, "stale budget")], NOW)
    assert await _hits(running, "acme", "budget")
    other = SqliteSearchIndex(tmp_path / "search.sqlite3")
    async with other.rebuild() as fresh:
        await fresh.index_segments("acme", "s-new", [_seg("s-new", 0, "fresh budget")], NOW)
    assert [h.sid for h in await _hits(running, "acme", "budget")] == ["s-new"]
    await running.index_segments("acme", "s-more", [_seg("s-more", 0, "more budget")], NOW)
    assert {h.sid for h in await _hits(other, "acme", "budget")} == {"s-new", "s-more"}
    await running.close()
    await other.close()
