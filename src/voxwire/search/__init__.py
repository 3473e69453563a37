"""Transcript search: the index interface, the query and the hits it returns.

:class:`SearchIndex` is what the indexer (final segments from the results
stream) and the gateway (searches) use. Two implementations answer the same
queries (:mod:`voxwire.search.query`) with the same hits, except where their
ranking functions differ in detail:

- :class:`voxwire.search.sqlite_fts.SqliteSearchIndex`: SQLite FTS5, embedded mode;
- :class:`voxwire.search.opensearch.OpenSearchIndex`: OpenSearch (or
  Elasticsearch: the mapping and queries keep to their common DSL), distributed mode.

The implementation modules are imported by whoever chooses one, so this
package needs none of their client libraries.

Both keep the windows of committed text (:mod:`voxwire.wire.windows`) beside the
segments, to find what was said across segments (:mod:`voxwire.search.spans`).

Every search is scoped to one tenant: a tenant never sees another's sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from voxwire.core.errors import VoxwireError
from voxwire.search.query import SearchHit, SearchPage, SearchQuery, SearchQueryError
from voxwire.wire.windows import TextWindow
from voxwire_client.messages import SegmentData


class SearchIndexError(VoxwireError):
    """The search index failed: unreachable, rejected a request, or a bad mapping."""

    code = "search"


class SegmentIndex(Protocol):
    """What indexing needs (the indexer, a rebuild)."""

    async def index_segments(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Add or replace (by ``segment.index``) final segments of one session."""
        ...

    async def index_windows(
        self,
        tenant_id: str,
        sid: str,
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Add or replace (by ``window.index``) windows of committed text of one session."""
        ...

    async def replace_session(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Make ``segments`` and ``windows`` all that is indexed of one session, in one
        step (a new transcript version replaces the old one)."""
        ...


class SearchIndex(SegmentIndex, Protocol):
    async def ensure_index(self) -> bool:
        """Create the index when missing; True when this call created it."""
        ...

    async def search(self, tenant_id: str, query: SearchQuery) -> SearchPage:
        """One page of the segments of ``tenant_id``'s sessions that answer ``query``,
        best first; raise SearchQueryError for a query with nothing to search."""
        ...

    async def refresh(self) -> None:
        """Make everything indexed so far searchable now."""
        ...

    async def delete_session(self, tenant_id: str, sid: str) -> None:
        """Remove everything indexed of one session (a deleted session); none is fine."""
        ...

    async def close(self) -> None: ...


__all__ = [
    "SearchHit",
    "SearchIndex",
    "SearchIndexError",
    "SearchPage",
    "SearchQuery",
    "SearchQueryError",
    "SegmentIndex",
]
