"""Rebuild a search index from the store: ``voxwire search reindex``.

Segments come from the stored transcripts, and their windows
(:func:`voxwire.wire.windows.windows_of`) are computed from them.

Needed after a mapping change (a new ``VERSION`` of the OpenSearch mapping), to
recover a lost or damaged index, or to index sessions transcribed while
indexing was off. The rebuild fills a new index while searches keep using the
old one, then swaps them in one step (see each backend's ``rebuild``), then
passes over the store once more so that nothing indexed into the old index
during the rebuild is lost. It can run while the platform runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from voxwire.search import SegmentIndex
from voxwire.store import SessionRecord
from voxwire.wire.windows import windows_of
from voxwire_client.messages import SegmentData

PAGE = 200


class SessionSource(Protocol):
    async def all_sessions(self, after: str = "", limit: int = 500) -> list[SessionRecord]: ...
    async def count_sessions(self) -> int: ...
    async def segments(self, sid: str) -> list[SegmentData]: ...


class Rebuildable(SegmentIndex, Protocol):
    def rebuild(self) -> contextlib.AbstractAsyncContextManager[SegmentIndex]: ...


@dataclass(frozen=True, slots=True)
class ReindexReport:
    sessions: int
    segments: int


async def reindex(
    store: SessionSource,
    index: Rebuildable,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> ReindexReport:
    """Index every session's segments into a fresh index and swap it in; then
    index them all again into the live index, for what was indexed into the old
    one meanwhile (indexing is idempotent: unchanged segments are no-ops).
    ``on_progress(done, total)`` is called after each session of both passes."""
    total = 2 * await store.count_sessions()
    done = 0

    def advance() -> None:
        nonlocal done
        done += 1
        on_progress(done, max(total, done))

    async with index.rebuild() as fresh:
        report = await _index_all(store, fresh, advance)
    await _index_all(store, index, advance)
    return report


async def _index_all(
    store: SessionSource, index: SegmentIndex, advance: Callable[[], None]
) -> ReindexReport:
    sessions = segments = 0
    after = ""
    while page := await store.all_sessions(after, PAGE):
        for session in page:
            found = await store.segments(session.sid)
            await index.index_segments(
                session.tenant_id, session.sid, found, session.created_at, session.language
            )
            await index.index_windows(
                session.tenant_id,
                session.sid,
                windows_of(found, session.sid),
                session.created_at,
                session.language,
            )
            sessions += 1
            segments += len(found)
            advance()
        after = page[-1].sid
    return ReindexReport(sessions=sessions, segments=segments)
