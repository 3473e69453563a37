"""Deleting a session everywhere, in both modes, for its owner or for retention.

:class:`SessionEraser` deletes in three steps, each safe to repeat:

1. the tombstone: the store marks the session deleted (``deleted_at``, and why);
   from then on every reader (status, transcript, audio, messages,
   re-transcription, stream frames, the broker's topic checks, the relay and the
   indexer) finds no such session, and answers 404 or drops what comes;
2. the removal: a live stream is told to end (as its client would), then its
   blobs (audio, parts, archive: local or S3), its search documents, its live
   checkpoint (Redis), the retained messages on ``transcription/<sid>/+``
   (empty retained payloads) and its rows in the store (message log, segments,
   matches, every transcript version, webhook deliveries) are removed;
3. the end: the store records the deletion as finished (``purged_at``).

A crash (or a step that fails) between 1 and 3 leaves the session tombstoned
and unfinished: the next request to delete it, or the sweeper
(:mod:`voxwire.gateway.sweeper`), runs steps 2 and 3 again. The deletion of a
session still running (a live stream, a job) is left unfinished on purpose: its
worker may still emit a last result or save a checkpoint after step 2, so the
sweeper repeats the removal once ``settle_s`` has passed and only then finishes it.

Each finished deletion writes one audit line (logger ``voxwire.audit``): the
sid, the tenant, the key that asked (or ``retention``), the reason and the time,
never the session's content. What cannot be deleted here: Kafka records (the
audio topic keeps streamed audio for ``audio_log_retention_h``) and the bytes
of deleted OpenSearch documents until the index merges its segments.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.metrics import SESSIONS_DELETED
from voxwire.search import SearchIndex
from voxwire.store import SessionState, Store
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.topics import TopicKind, session_topic

log = logging.getLogger(__name__)
audit = logging.getLogger("voxwire.audit")

RESULT_KINDS = tuple(TopicKind)
"""The retained topics of a session: ``transcription/<sid>/<kind>``."""
END_OF_STREAM = b'{"type": "end"}'


class Reason(StrEnum):
    REQUEST = "request"
    """Its owner asked (HTTP, SDK, CLI, MQTT)."""
    RETENTION = "retention"
    """Older than the installation's ``retention_days``."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who deleted a session, for the audit line."""

    tenant_id: str
    key_id: str | None = None
    """The API key that asked (None: a session token, or the sweeper)."""

    def __str__(self) -> str:
        return f"tenant={self.tenant_id} key={self.key_id or '-'}"


class RetainedPublisher(Protocol):
    async def publish_async(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
        timeout_s: float | None = None,
        correlation: bytes | None = None,
    ) -> None: ...


class CheckpointStore(Protocol):
    async def forget(self, sid: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a call to :meth:`SessionEraser.delete` did."""

    sid: str
    tombstoned: bool
    """This call wrote the tombstone (False: an earlier one had)."""
    finished: bool
    """Nothing of the session is left (False: the sweeper finishes it)."""


class SessionEraser:
    """Deletes sessions: see the module docstring."""

    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        search: SearchIndex,
        bus: Bus,
        *,
        retained: RetainedPublisher | None = None,
        checkpoints: CheckpointStore | None = None,
        settle_s: float = 60.0,
    ) -> None:
        """``retained``: publishes the empty retained payloads (None: no broker
        here); ``checkpoints``: where live streams keep theirs (None: in-process)."""
        self._store = store
        self._blobs = blobs
        self._search = search
        self._bus = bus
        self._retained = retained
        self._checkpoints = checkpoints
        self.settle_s = settle_s

    async def delete(
        self, state: SessionState, actor: Actor, reason: Reason, now: datetime | None = None
    ) -> Outcome:
        """Delete the session of ``state`` (as :meth:`Store.session_state` read it;
        the caller checked who may). Raises what a step raised: the session stays
        tombstoned, and a later call or the sweeper finishes it. ``now``: the clock."""
        session = state.session
        sid = session.sid
        tombstoned = await self._store.mark_deleted(sid, reason.value)
        if state.purged_at is not None:
            return Outcome(sid, tombstoned, finished=True)
        busy = not session.status.terminal  # a stream or a job a worker may still write for
        if tombstoned and busy and session.filename is None:
            await self._end_stream(sid)
        await self.remove(sid, session.tenant_id)
        now = now or datetime.now(UTC)
        since = (now - (state.deleted_at or now)).total_seconds()
        if busy and since < self.settle_s:
            log.info("session %s deleted; the sweeper finishes it once its worker settled", sid)
            return Outcome(sid, tombstoned, finished=False)
        await self.finish(sid, actor, state.reason or reason.value)
        return Outcome(sid, tombstoned, finished=True)

    async def remove(self, sid: str, tenant_id: str) -> None:
        """Step 2: everything the session holds, anywhere; idempotent."""
        await asyncio.to_thread(self._blobs.delete_session, sid)
        await self._search.delete_session(tenant_id, sid)
        if self._checkpoints is not None:
            await self._checkpoints.forget(sid)
        if self._retained is not None:
            for kind in RESULT_KINDS:
                await self._retained.publish_async(session_topic(sid, kind), b"", retain=True)
        await self._store.drop_deliveries(sid)  # its webhooks: nothing is sent for it any more
        await self._store.purge_session(sid)

    async def finish(self, sid: str, actor: Actor, reason: str) -> None:
        """Step 3, and the audit line."""
        if await self._store.finish_deletion(sid):
            SESSIONS_DELETED.labels(reason=reason).inc()
            audit.info(
                "session deleted sid=%s %s reason=%s at=%s",
                sid,
                actor,
                reason,
                datetime.now(UTC).isoformat(timespec="seconds"),
            )

    async def _end_stream(self, sid: str) -> None:
        """Tell the stream's worker that the stream ended, as its client would."""
        end = ClientPublish(topic=f"audio/{sid}/control", payload=END_OF_STREAM)
        await self._bus.produce(AUDIO_TOPIC, sid, end.encode())
