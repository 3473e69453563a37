"""Search indexing: committed segments and windows of committed text into the index.

Two consumer groups of their own, on ``transcription.results`` (final
segments; a re-transcription's transcript replaces the session's whole entry,
:meth:`~voxwire.search.SegmentIndex.replace_session`) and ``transcription.windows``
(:mod:`voxwire.wire.windows`), so a slow or unavailable search cluster never
delays delivery to subscribers. Each batch is grouped by session and written
with one update per session; indexing is idempotent (by segment and window
index), so a redelivered batch changes nothing. A commit the bus refuses (Kafka
rebalancing the group as a bridge joins or leaves) is only logged: a later
commit covers the batch, or it is delivered again. A batch the index or the
store cannot take now (a cluster restarting) is written again after a wait
that doubles up to ``retry_s[1]``, uncommitted meanwhile: an outage of the
search cluster delays indexing and never stops the bridge, whose relay shares
the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import Bus, Record, commit_or_warn
from voxwire.core.errors import StoreError
from voxwire.search import SearchIndexError, SegmentIndex
from voxwire.store import SessionRecord
from voxwire.wire.topics import RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import TextWindow, windows_of
from voxwire_client.messages import SegmentData, SegmentMessage, TranscriptMessage, parse_message

log = logging.getLogger(__name__)

INDEXER_GROUP = "voxwire-indexer"
WINDOW_INDEXER_GROUP = "voxwire-window-indexer"
RETRY_S = (1.0, 30.0)
"""The first and the longest wait before a refused batch is written again."""


class SessionLookup(Protocol):
    async def get_session(self, sid: str) -> SessionRecord | None: ...


class SegmentIndexer:
    def __init__(
        self,
        bus: Bus,
        sessions: SessionLookup,
        index: SegmentIndex,
        *,
        batch_size: int = 500,
        retry_s: tuple[float, float] = RETRY_S,
    ) -> None:
        self._bus = bus
        self._sessions = sessions
        self._index = index
        self._batch_size = batch_size
        self._retry_s = retry_s
        self.indexed = 0
        self.windows_indexed = 0

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._consume(RESULTS_TOPIC, INDEXER_GROUP, self._segments))
            group.create_task(self._consume(WINDOWS_TOPIC, WINDOW_INDEXER_GROUP, self._windows))

    async def _consume(
        self, topic: str, group: str, index: Callable[[list[Record]], Awaitable[None]]
    ) -> None:
        subscription = self._bus.subscribe(topic, group)
        try:
            while True:
                records = await subscription.next_batch(self._batch_size)
                await self._until_written(topic, index, records)
                await commit_or_warn(subscription, records)
        finally:
            await subscription.close()

    async def _until_written(
        self, topic: str, index: Callable[[list[Record]], Awaitable[None]], records: list[Record]
    ) -> None:
        """``index(records)``, again after a wait while the index or the store refuses."""
        wait, longest = self._retry_s
        while True:
            try:
                await index(records)
                return
            except (SearchIndexError, StoreError) as exc:
                log.warning(
                    "indexer: %d records of %s not written (%s); again in %.1f s",
                    len(records), topic, exc, wait,
                )  # fmt: skip
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)

    async def _segments(self, records: list[Record]) -> None:
        finals: dict[str, list[SegmentData]] = defaultdict(list)
        versions: dict[str, TranscriptMessage] = {}  # a new version of the whole transcript
        for record in records:
            try:
                message = parse_message(record.value)
            except ValidationError:
                continue
            if isinstance(message, SegmentMessage) and message.type == "final":
                if message.version == 1:  # a later version's go in whole, with its transcript
                    finals[message.sid].append(message.segment)
            elif isinstance(message, TranscriptMessage) and message.version > 1:
                finals.pop(message.sid, None)
                versions[message.sid] = message
        for sid, transcript in versions.items():
            if session := await self._session(sid):
                await self._index.replace_session(
                    session.tenant_id,
                    sid,
                    transcript.segments,
                    windows_of(list(transcript.segments), sid),
                    session.created_at,
                    transcript.language,
                )
                self.indexed += len(transcript.segments)
        for sid, segments in finals.items():
            if session := await self._session(sid):
                await self._index.index_segments(
                    session.tenant_id, sid, segments, session.created_at, session.language
                )
                self.indexed += len(segments)

    async def _windows(self, records: list[Record]) -> None:
        latest: dict[str, dict[int, TextWindow]] = defaultdict(dict)
        for record in records:
            try:
                window = TextWindow.model_validate_json(record.value)
            except ValidationError:
                log.warning("indexer: dropping a malformed window (offset %d)", record.offset)
                continue
            latest[window.sid][window.index] = window  # a later version replaces it
        for sid, windows in latest.items():
            if session := await self._session(sid):
                await self._index.index_windows(
                    session.tenant_id, sid, list(windows.values()), session.created_at
                )
                self.windows_indexed += len(windows)

    async def _session(self, sid: str) -> SessionRecord | None:
        session = await self._sessions.get_session(sid)
        if session is None:
            log.warning("indexer: no session %s in the store; what it sent is skipped", sid)
        return session
