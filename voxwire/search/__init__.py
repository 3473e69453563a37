"""Transcript search: the index interface and the hits it returns.

:class:`SearchIndex` is what workers (indexing final segments) and the gateway
(searching) use; :class:`voxwire.search.opensearch.OpenSearchIndex` implements it
on OpenSearch (and Elasticsearch: the mapping and queries keep to their common
DSL). The implementation modules are imported by whoever chooses one, so this
package needs none of their client libraries.

Every search is scoped to one tenant: a tenant never sees another's sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from voxwire.errors import VoxwireError
from voxwire_client.messages import SegmentData


class SearchIndexError(VoxwireError):
    """The search index failed: unreachable, rejected a request, or a bad mapping."""

    code = "search"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching segment; ``highlight`` marks the matched words with ``<em>``."""

    sid: str
    segment_id: str
    index: int
    start_ms: int
    end_ms: int
    text: str
    highlight: str
    score: float


class SearchIndex(Protocol):
    async def ensure_index(self) -> bool:
        """Create the index when missing; True when this call created it."""
        ...

    async def index_segment(
        self,
        tenant_id: str,
        sid: str,
        segment: SegmentData,
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Add or replace (by ``segment.index``) one final segment of a session."""
        ...

    async def search(
        self, tenant_id: str, query: str, sid: str | None = None, size: int = 10
    ) -> list[SearchHit]:
        """The best matching segments of ``tenant_id``'s sessions (or of one session)."""
        ...

    async def close(self) -> None: ...


__all__ = ["SearchHit", "SearchIndex", "SearchIndexError"]
