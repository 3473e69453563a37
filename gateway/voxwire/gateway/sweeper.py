"""The sweeper: retention, and deletions left unfinished.

Every ``sweep_interval_s`` each gateway:

- finishes the deletions tombstoned more than ``settle_s`` ago and not
  finished (a crash half-way, a failed step, a live stream that had to settle),
  running the removal again (:class:`~voxwire.sessions.deletion.SessionEraser`);
- with ``retention_days`` set, deletes the sessions created longer ago than
  that, through the same path, with the reason ``retention``.

Several gateways may sweep at once: every step of a deletion is idempotent,
and the store's conditional updates (:meth:`Store.mark_deleted`,
:meth:`Store.finish_deletion`) let exactly one of them tombstone a session and
exactly one finish it, so each deletion is counted once in
``voxwire_sessions_deleted{reason}`` and audited once. Each sweep that did
something logs one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

from voxwire.core.errors import VoxwireError
from voxwire.sessions.deletion import Actor, Outcome, Reason, SessionEraser
from voxwire.store import Store

log = logging.getLogger(__name__)

BATCH = 100
"""Sessions taken per query; a sweep goes on until none is left."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    expired: int = 0
    """Sessions this sweep deleted for retention (tombstoned by this sweeper)."""
    finished: int = 0
    """Unfinished deletions this sweep finished."""
    failed: int = 0
    """Deletions that failed (left for the next sweep)."""


class Sweeper:
    def __init__(
        self, store: Store, eraser: SessionEraser, retention_days: float | None = None
    ) -> None:
        self._store = store
        self._eraser = eraser
        self._retention = (
            timedelta(days=retention_days) if retention_days and retention_days > 0 else None
        )

    async def run(self, every_s: float) -> None:
        while True:
            try:
                report = await self.sweep()
            except VoxwireError as exc:
                log.warning("sweep failed: %s; trying again in %gs", exc, every_s)
            else:
                if report != SweepReport():
                    log.info(
                        "sweep: %d sessions deleted for retention, %d deletions finished, "
                        "%d failed",
                        report.expired,
                        report.finished,
                        report.failed,
                    )
            await asyncio.sleep(every_s)

    async def sweep(self, now: datetime | None = None) -> SweepReport:
        """One sweep; ``now`` for tests (the clock)."""
        now = now or datetime.now(UTC)
        finished, failed = await self._finish_unfinished(now)
        expired = 0
        if self._retention is not None:
            expired, more_failed = await self._expire(now - self._retention, now)
            failed += more_failed
        return SweepReport(expired, finished, failed)

    async def _finish_unfinished(self, now: datetime) -> tuple[int, int]:
        before = now - timedelta(seconds=self._eraser.settle_s)
        batches = partial(self._store.unfinished_deletions, before, BATCH)
        return await self._each(batches, Reason.REQUEST, now, lambda done: done.finished)

    async def _expire(self, before: datetime, now: datetime) -> tuple[int, int]:
        batches = partial(self._store.sessions_created_before, before, BATCH)
        return await self._each(batches, Reason.RETENTION, now, lambda done: done.tombstoned)

    async def _each(
        self,
        batches: Callable[[], Awaitable[list[str]]],
        reason: Reason,
        now: datetime,
        counted: Callable[[Outcome], bool],
    ) -> tuple[int, int]:
        """Delete the sessions ``batches`` names until it names none not seen yet:
        (how many ``counted``, how many failed)."""
        done = failed = 0
        seen: set[str] = set()
        while sids := await batches():
            fresh = [s for s in sids if s not in seen]
            if not fresh:
                break
            for sid in fresh:
                seen.add(sid)
                outcome = await self._delete(sid, reason, now)
                done += outcome is not None and counted(outcome)
                failed += outcome is None
        return done, failed

    async def _delete(self, sid: str, reason: Reason, now: datetime) -> Outcome | None:
        """Delete ``sid``; None when a step failed (the next sweep tries again)."""
        state = await self._store.session_state(sid)
        if state is None:
            return Outcome(sid, tombstoned=False, finished=True)
        try:
            return await self._eraser.delete(state, Actor(state.session.tenant_id), reason, now)
        except VoxwireError as exc:
            log.warning("sweep: deleting session %s failed: %s", sid, exc)
            return None
