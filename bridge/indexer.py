"""Search indexing: committed segments from the results stream into the index.

A consumer group of its own on ``transcription.results``, so a slow or
unavailable search cluster never delays delivery to subscribers. Each batch
is grouped by session and written with one update per session; indexing is
idempotent by segment index, so a redelivered batch changes nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import RESULTS_TOPIC, Bus
from voxwire.search import SegmentIndex
from voxwire.store import SessionRecord
from voxwire_client.messages import SegmentData, SegmentMessage, parse_message

log = logging.getLogger(__name__)

INDEXER_GROUP = "voxwire-indexer"


class SessionLookup(Protocol):
    async def get_session(self, sid: str) -> SessionRecord | None: ...


class SegmentIndexer:
    def __init__(
        self, bus: Bus, sessions: SessionLookup, index: SegmentIndex, *, batch_size: int = 500
    ) -> None:
        self._bus = bus
        self._sessions = sessions
        self._index = index
        self._batch_size = batch_size
        self.indexed = 0

    async def run(self) -> None:
        subscription = self._bus.subscribe(RESULTS_TOPIC, INDEXER_GROUP)
        try:
            while True:
                records = await subscription.next_batch(self._batch_size)
                finals: dict[str, list[SegmentData]] = defaultdict(list)
                for record in records:
                    try:
                        message = parse_message(record.value)
                    except ValidationError:
                        continue
                    if isinstance(message, SegmentMessage) and message.type == "final":
                        finals[message.sid].append(message.segment)
                for sid, segments in finals.items():
                    await self._index_session(sid, segments)
                await subscription.commit(*records)
        finally:
            await subscription.close()

    async def _index_session(self, sid: str, segments: list[SegmentData]) -> None:
        session = await self._sessions.get_session(sid)
        if session is None:
            log.warning("indexer: no session %s in the store; its segments are skipped", sid)
            return
        await self._index.index_segments(
            session.tenant_id, sid, segments, session.created_at, session.language
        )
        self.indexed += len(segments)
