"""Transcript search on OpenSearch (or Elasticsearch: common DSL only).

One document per session, id ``<tenant_id>:<sid>``, in the index
``voxwire-transcripts-v4`` behind the alias ``voxwire-transcripts`` (a new
mapping goes to ``-v5``, is filled by ``voxwire search reindex``, and the alias
is swapped; the mapping is in :mod:`voxwire.search.opensearch_mapping`)::

    sid, tenant_id, language   keyword
    created_at                 date
    text                       the segments' text in index order
    segments                   nested: segment_id, index, start_ms, end_ms,
                               text, norm, speaker (keyword)
    windows                    nested: index, start_ms, end_ms, norm, speakers
                               (keyword: its segments' labels), and the
                               window's segments (kept, not indexed)

Searches run on ``segments.norm``: the segment's words as
:func:`voxwire.text.normalization.normalize` writes them (numbers as digits, accents and
punctuation gone), analysed by ``vx_norm`` (whitespace tokenizer, lowercase,
Porter stemmer), as SQLite FTS5's ``porter`` tokenizer does in embedded mode.
``text`` keeps the source design's ``vx_english`` analysis (standard
tokenizer, possessive stemmer, lowercase, asciifolding, English stop words,
English stemmer; ``.exact`` without stop words and stemming) for ad-hoc use
in OpenSearch Dashboards.

Windows (:mod:`voxwire.wire.windows`) are searched the same way, for what is said
across segments (:mod:`voxwire.search.spans`).

Segments and windows arrive a few at a time, possibly redelivered or out of
order: a scripted upsert (Painless, run atomically on the shard, retried on
version conflicts) replaces the item with the same index or inserts it in
order, and is a no-op when nothing changed. Searches filter on ``tenant_id`` before anything else.

opensearch-py's async client needs aiohttp; the sync client is used instead,
each call in a worker thread (the client is thread-safe, with a pool of HTTP
connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from opensearchpy import OpenSearch
from opensearchpy.exceptions import OpenSearchException, RequestError
from pydantic import TypeAdapter

from voxwire.search import SearchIndexError
from voxwire.search.opensearch_mapping import (
    ADDED,
    MAPPINGS,
    TEXT_ANALYSIS,
    UPSERT_ITEMS,
    VERSION,
)
from voxwire.search.query import (
    MAX_OFFSET,
    MAX_PAGE,
    ParsedQuery,
    SearchHit,
    SearchPage,
    SearchQuery,
    fuzzy_distance,
    parse_query,
)
from voxwire.search.spans import page_of, spans_possible, speakers_of, window_hits
from voxwire.text.normalization import normalize
from voxwire.wire.windows import TextWindow
from voxwire_client.messages import SegmentData

ALIAS = "voxwire-transcripts"

_T = TypeVar("_T")
_SEGMENTS = TypeAdapter(tuple[SegmentData, ...])
log = logging.getLogger(__name__)


class OpenSearchIndex:
    """A :class:`~voxwire.search.SearchIndex` on OpenSearch; open with :meth:`open`."""

    def __init__(
        self,
        client: OpenSearch,
        *,
        alias: str = ALIAS,
        version: int = VERSION,
        shards: int = 1,
        replicas: int | None = None,
        target: str | None = None,
    ) -> None:
        self._client = client
        self.alias = alias
        self.index = f"{alias}-v{version}"
        self._target = target or alias  # where segments are written
        self._shards = shards
        self._replicas = replicas

    @classmethod
    def open(
        cls,
        url: str,
        *,
        alias: str = ALIAS,
        version: int = VERSION,
        shards: int = 1,
        replicas: int | None = None,
        timeout: float = 10.0,
    ) -> OpenSearchIndex:
        """An index on the cluster at ``url`` (``http(s)://user:pass@host:port``).

        Nothing is sent until the first call; :meth:`ensure_index` is the usual one.
        ``replicas`` None keeps the cluster default (set 0 on a single node).
        """
        client = OpenSearch(hosts=[url], timeout=timeout, max_retries=2, retry_on_timeout=True)
        return cls(client, alias=alias, version=version, shards=shards, replicas=replicas)

    async def _call(self, fn: Callable[..., _T], **kwargs: Any) -> _T:
        try:
            return await asyncio.to_thread(fn, **kwargs)
        except OpenSearchException as exc:
            raise SearchIndexError(
                f"OpenSearch: {exc}", hint="check VOXWIRE_OPENSEARCH_URL"
            ) from exc

    async def ping(self) -> str:
        """The cluster's health (readiness): green or yellow; red is not ready."""
        health = await self._call(self._client.cluster.health, request_timeout=1.5)
        status = str(health.get("status"))
        if status not in ("green", "yellow"):
            raise SearchIndexError(f"OpenSearch cluster health is {status}")
        return f"cluster {status}"

    async def ensure_index(self) -> bool:
        """Create the versioned index and its alias when missing; True if created here.

        Safe when several processes start at once: losing the race is not an error.
        """
        if await self._call(self._client.indices.exists_alias, name=self.alias):
            await self._check_version()
            return False
        body = {**self._index_body(), "aliases": {self.alias: {}}}
        try:
            await asyncio.to_thread(self._client.indices.create, index=self.index, body=body)
        except RequestError as exc:
            if exc.error != "resource_already_exists_exception":
                raise SearchIndexError(f"OpenSearch: {exc}") from exc
            await self._call(self._client.indices.put_alias, index=self.index, name=self.alias)
            return False
        except OpenSearchException as exc:
            raise SearchIndexError(f"OpenSearch: {exc}") from exc
        return True

    def _index_body(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "number_of_shards": self._shards,
            "analysis": TEXT_ANALYSIS,
            # a page of hits is drawn from one session's segments at worst
            "max_inner_result_window": MAX_OFFSET + MAX_PAGE + 1,
        }
        if self._replicas is not None:
            settings["number_of_replicas"] = self._replicas
        return {"settings": settings, "mappings": MAPPINGS}

    async def _aliased(self) -> list[str]:
        """The indices behind the alias (none when it does not exist)."""
        found = await self._call(
            self._client.indices.get_alias, name=self.alias, params={"ignore": 404}
        )
        return sorted(name for name in found if "error" not in found and name != "status")

    async def _check_version(self) -> None:
        for name in await self._aliased():
            mapping = await self._call(self._client.indices.get_mapping, index=name)
            version = int(mapping[name]["mappings"].get("_meta", {}).get("version", 1))
            if version < VERSION:
                # the new fields, so that writes of this version are accepted
                await self._call(self._client.indices.put_mapping, index=name, body=ADDED)
                log.warning(
                    "the search index %s has mapping version %d, this voxwire writes %d: "
                    "searches miss what it lacks (speakers of what it held) until "
                    "`voxwire search reindex` rebuilds it",
                    name,
                    version,
                    VERSION,
                )

    @contextlib.asynccontextmanager
    async def rebuild(self) -> AsyncIterator[OpenSearchIndex]:
        """A new, empty index to fill; once the block ends without an error the
        alias moves to it in one step (searches see the old index until then)
        and the old indices are deleted, else the new one is."""
        fresh = f"{self.alias}-v{VERSION}-{time.strftime('%Y%m%d%H%M%S')}"
        await self._call(self._client.indices.create, index=fresh, body=self._index_body())
        writer = OpenSearchIndex(self._client, alias=self.alias, target=fresh)
        try:
            yield writer
            await self._call(self._client.indices.refresh, index=fresh)
        except BaseException:
            await self._call(self._client.indices.delete, index=fresh)
            raise
        old = [name for name in await self._aliased() if name != fresh]
        actions: list[dict[str, Any]] = [{"add": {"index": fresh, "alias": self.alias}}]
        actions += [{"remove": {"index": name, "alias": self.alias}} for name in old]
        await self._call(self._client.indices.update_aliases, body={"actions": actions})
        for name in old:
            await self._call(self._client.indices.delete, index=name)
        self.index = fresh

    async def drop_index(self) -> None:
        """Delete the index and every index behind the alias (and so the alias)."""
        for name in {self.index, *await self._aliased()}:
            await self._call(
                self._client.indices.delete, index=name, params={"ignore_unavailable": "true"}
            )

    async def refresh(self) -> None:
        """Make everything indexed so far searchable now (tests, benchmarks)."""
        await self._call(self._client.indices.refresh, index=self.alias)

    async def index_segments(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Add or replace several segments of one session in one update."""
        if not segments:
            return
        items = [_segment_doc(s) for s in segments]
        language = language or segments[-1].language
        await self._upsert(tenant_id, sid, "segments", items, created_at, language)

    async def index_windows(
        self,
        tenant_id: str,
        sid: str,
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Add or replace several windows of one session in one update."""
        if not windows:
            return
        items = [_window_doc(w) for w in windows]
        await self._upsert(tenant_id, sid, "windows", items, created_at, language)

    async def replace_session(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Write the session's document anew: these segments and windows only."""
        ordered = sorted(segments, key=lambda s: s.index)
        body = {
            "sid": sid,
            "tenant_id": tenant_id,
            "language": language or (ordered[-1].language if ordered else None),
            "created_at": created_at.isoformat(),
            "segments": [_segment_doc(s) for s in ordered],
            "windows": [_window_doc(w) for w in windows],
            "text": " ".join(s.text for s in ordered),
        }
        await self._call(self._client.index, index=self._target, id=f"{tenant_id}:{sid}", body=body)

    async def delete_session(self, tenant_id: str, sid: str) -> None:
        """Delete the session's document (searches stop finding it at once; its bytes
        leave the index files when OpenSearch merges their segments)."""
        await self._call(
            self._client.delete,
            index=self._target,
            id=f"{tenant_id}:{sid}",
            params={"refresh": "true", "ignore": 404},
        )

    async def _upsert(
        self,
        tenant_id: str,
        sid: str,
        field: str,
        items: list[dict[str, Any]],
        created_at: datetime,
        language: str | None,
    ) -> None:
        params = {"field": field, "items": items, "language": language}
        body = {
            "scripted_upsert": True,
            "script": {"lang": "painless", "source": UPSERT_ITEMS, "params": params},
            "upsert": {
                "sid": sid,
                "tenant_id": tenant_id,
                "language": None,
                "created_at": created_at.isoformat(),
                "segments": [],
                "windows": [],
                "text": "",
            },
        }
        await self._call(
            self._client.update,
            index=self._target,
            id=f"{tenant_id}:{sid}",
            body=body,
            params={"retry_on_conflict": 5},
        )

    async def search(self, tenant_id: str, query: SearchQuery) -> SearchPage:
        """One page of ``tenant_id``'s segments that answer ``query``, best first."""
        parsed = parse_query(query.q)
        limit = query.offset + query.size + 1  # one more: is there a next page?
        searches: list[dict[str, Any]] = [
            {"index": self.alias},
            _search_body(tenant_id, query, parsed, limit, "segments"),
        ]
        if spans_possible(parsed):  # both in one request
            searches += [
                {"index": self.alias},
                _search_body(
                    tenant_id,
                    query,
                    parsed.windows_for(query.speaker),
                    limit,
                    "windows",
                    per_doc=_WINDOWS_PER_DOC,
                ),
            ]
        answers = (await self._call(self._client.msearch, body=searches))["responses"]
        for answer in answers:
            if "error" in answer:
                raise SearchIndexError(f"OpenSearch: {answer['error']}")
        segment_hits = [h for doc in answers[0]["hits"]["hits"] for h in _segment_hits(doc)]
        spanning: list[SearchHit] = []
        for doc in answers[1]["hits"]["hits"] if len(answers) > 1 else []:
            sid = str(doc["_source"]["sid"])
            for inner in doc["inner_hits"]["windows"]["hits"]["hits"]:
                found = _SEGMENTS.validate_python(inner["_source"]["segments"])
                spanning += window_hits(sid, found, float(inner["_score"]), parsed, query)
        return page_of(segment_hits, spanning, query, parsed)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)


def _segment_doc(segment: SegmentData) -> dict[str, Any]:
    return {
        "segment_id": segment.id,
        "index": segment.index,
        "start_ms": segment.start_ms,
        "end_ms": segment.end_ms,
        "text": segment.text,
        "norm": " ".join(t.text for t in normalize(segment.text)),
        "speaker": segment.speaker,
    }


def _window_doc(window: TextWindow) -> dict[str, Any]:
    return {
        "index": window.index,
        "start_ms": window.start_ms,
        "end_ms": window.end_ms,
        "norm": " ".join(t.text for t in normalize(window.text)),
        "speakers": speakers_of(window.segments),
        "segments": _SEGMENTS.dump_python(window.segments, mode="json"),
    }


def _search_body(
    tenant_id: str,
    query: SearchQuery,
    parsed: ParsedQuery,
    limit: int,
    path: str,
    *,
    per_doc: int | None = None,
) -> dict[str, Any]:
    """Sessions of the tenant with the filters on the document, and the nested
    items at ``path`` (segments or windows) that answer the query (with the
    time window) as inner hits."""
    filters: list[dict[str, Any]] = [{"term": {"tenant_id": tenant_id}}]
    if query.sids is not None:
        filters.append({"terms": {"sid": list(query.sids)}})
    if query.language is not None:
        filters.append({"term": {"language": query.language}})
    created: dict[str, str] = {}
    if query.created_from is not None:
        created["gte"] = query.created_from.isoformat()
    if query.created_to is not None:
        created["lt"] = query.created_to.isoformat()
    if created:
        filters.append({"range": {"created_at": created}})
    must: list[dict[str, Any]] = []
    for word in parsed.words:
        fuzziness = fuzzy_distance(word) if query.fuzzy else 0
        must.append({"match": {f"{path}.norm": {"query": word, "fuzziness": fuzziness}}})
    for phrase in parsed.phrases:
        must.append({"match_phrase": {f"{path}.norm": " ".join(phrase)}})
    timing: list[dict[str, Any]] = []
    if query.start_ms is not None:
        timing.append({"range": {f"{path}.end_ms": {"gt": query.start_ms}}})
    if query.end_ms is not None:
        timing.append({"range": {f"{path}.start_ms": {"lt": query.end_ms}}})
    if query.speaker is not None:  # a window: one that holds the speaker's segments
        field = f"{path}.speaker" if path == "segments" else f"{path}.speakers"
        timing.append({"term": {field: query.speaker}})
    fields = _HIT_FIELDS if path == "segments" else ["windows.segments"]
    nested = {
        "path": path,
        "score_mode": "max",
        "query": {"bool": {"must": must, "filter": timing}},
        "inner_hits": {"size": min(limit, per_doc or limit), "_source": fields},
    }
    return {
        "size": limit,
        "_source": ["sid"],
        "query": {"bool": {"filter": filters, "must": [{"nested": nested}]}},
    }


_HIT_FIELDS = [
    f"segments.{f}" for f in ("segment_id", "index", "start_ms", "end_ms", "text", "speaker")
]
_WINDOWS_PER_DOC = 3
"""Windows of one session read for words across segments: the best few (each
carries its segments, and most hits lie within one segment anyway)."""


def _segment_hits(doc: dict[str, Any]) -> list[SearchHit]:
    sid = str(doc["_source"]["sid"])
    found: list[SearchHit] = []
    for inner in doc["inner_hits"]["segments"]["hits"]["hits"]:
        seg = inner["_source"]
        found.append(
            SearchHit(
                sid=sid,
                segment_id=str(seg["segment_id"]),
                index=int(seg["index"]),
                start_ms=int(seg["start_ms"]),
                end_ms=int(seg["end_ms"]),
                text=str(seg["text"]),
                highlight="",
                score=float(inner["_score"]),
                speaker=seg.get("speaker"),
            )
        )
    return found


__all__ = ["ALIAS", "VERSION", "OpenSearchIndex"]
