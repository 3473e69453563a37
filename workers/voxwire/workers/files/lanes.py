"""Two lanes of file jobs: new uploads first, shared fairly among tenants;
re-transcriptions only when quiet.

A worker reads ``transcription.jobs`` (uploads) and ``transcription.rejobs``
(re-transcriptions, :mod:`voxwire_client.versions`) through :class:`JobLanes`.

Uploads are read ahead of the engines, up to :data:`READ_AHEAD` records, into a
:class:`~voxwire.workers.files.fair.FairQueue`: one queue per tenant, the next
job chosen by start-time fair queuing over audio seconds. A tenant's backlog
of a thousand files therefore delays another tenant's next file by at most
the job each engine is running when it arrives, as long as that file is within
the read-ahead of the worker that owns its partition (jobs are keyed by
session, so a tenant's backlog spreads over every partition and every worker
of the group; each worker is fair over what it reads). Read-ahead costs no
durability: the records are committed only after their job is done, in
partition order (:mod:`voxwire.bus.offsets`), so a worker that dies with
backlogs in hand leaves them to the next owner of its partitions, which
delivers them all again; a record whose partition moved to another worker
meanwhile is dropped here, unrun, for the same reason, and one the bus delivers
again while it is still here (its partition went and came back) is not taken
twice. Records of another
model's pool are committed as they are read (that pool's group reads them).

:meth:`JobLanes.next` hands out an upload whenever one may run (a session's
jobs run one at a time, in order: :meth:`JobLanes.finished` ends one); a
re-transcription only while ``quiet()`` says the worker has nothing else to
do (no upload in flight, no live stream open in the process) and no upload
waits. A re-transcription under way yields the same way: its engine polls
:meth:`JobLanes.must_yield` and aborts, and the job goes back to the front of
the lane (:meth:`JobLanes.again`), to run again from the start once it is
quiet; its messages repeat the same ``seq`` values, which the store and the
SDKs drop as repeats.

The reads of both topics stay pending across calls (never cancelled while a
record may be on its way), so no record is taken and then forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from voxwire.bus import Record, Subscription, commit_or_warn
from voxwire.core.metrics import JOBS_WAITING
from voxwire.workers.files.fair import FairQueue

_RECHECK_S = 0.25
"""How often a waiting re-transcription looks again whether the worker is quiet."""
READ_AHEAD = 500
"""Upload records a worker holds read and not started, at most (a job record is
about 1 KB): the depth of backlog within which fairness holds."""


def job_tags(record: Record) -> tuple[str, float]:
    """A job record's tenant and cost (audio seconds); a malformed record's are
    ("", 0): it is dropped, with a log line, when it runs."""
    try:
        job = json.loads(record.value)
        tenant, duration_ms = job.get("tenant_id"), job.get("duration_ms")
    except (ValueError, AttributeError):
        return "", 0.0
    cost = duration_ms / 1000 if isinstance(duration_ms, int | float) else 0.0
    return (tenant if isinstance(tenant, str) else ""), cost


class JobLanes:
    def __init__(
        self,
        uploads: Subscription,
        again: Subscription,
        *,
        takes: Callable[[Record], bool] = lambda record: True,
        read_ahead: int = READ_AHEAD,
        fair: bool = True,
    ) -> None:
        """``takes``: whether a job is for this worker (its model's pool); ``fair``:
        False runs uploads in the order read."""
        self.uploads = uploads
        self.rejobs = again
        self._takes = takes
        self._read_ahead = read_ahead
        self._fair: FairQueue[Record] = FairQueue(in_arrival_order=not fair)
        self._running: Counter[str] = Counter()
        self._held: dict[tuple[int, int], str] = {}
        """The tenant of each upload read and not finished, by (partition, offset): a
        record the bus delivers again after a rebalance gave its partition back is
        not run twice."""
        self._changed = asyncio.Event()
        self._room = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._rejob_next: asyncio.Task[Record] | None = None
        self._yielded: deque[Record] = deque()

    def upload_waiting(self) -> bool:
        """An upload was read that no engine took yet."""
        return len(self._fair) > 0

    def must_yield(self, quiet: Callable[[], bool]) -> bool:
        """Whether a re-transcription under way should give its engine back now."""
        return self.upload_waiting() or not quiet()

    def again(self, record: Record) -> None:
        """A re-transcription that yielded: first in its lane."""
        self._yielded.appendleft(record)

    def finished(self, record: Record) -> None:
        """An upload handed out by :meth:`next` is over (done, failed or handed back):
        the next job of its session may run."""
        self._held.pop((record.partition, record.offset), None)
        self._running[record.key] -= 1
        if self._running[record.key] <= 0:
            del self._running[record.key]
        self._changed.set()

    async def next(self, quiet: Callable[[], bool]) -> tuple[Record, bool]:
        """The next job, and whether it is a re-transcription."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="read jobs ahead")
        while True:
            self._changed.clear()
            upload = self._next_upload()
            if upload is not None:
                return upload, False
            changed = asyncio.create_task(self._changed.wait())
            waits: set[asyncio.Task[Any]] = {changed, self._reader}
            if quiet() and not self.upload_waiting():
                if self._yielded:
                    changed.cancel()
                    return self._yielded.popleft(), True
                if self._rejob_next is None:
                    self._rejob_next = asyncio.create_task(self.rejobs.next())
                if self._rejob_next.done():
                    changed.cancel()
                    task, self._rejob_next = self._rejob_next, None
                    return task.result(), True
                waits.add(self._rejob_next)
            try:
                await asyncio.wait(waits, timeout=_RECHECK_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
            if self._reader.done():  # it failed (the bus): say so here
                self._reader.result()

    def _next_upload(self) -> Record | None:
        while (record := self._fair.pop(running=self._running)) is not None:
            self._room.set()
            JOBS_WAITING.labels(tenant=self._held[record.partition, record.offset]).dec()
            if self.uploads.owns(record.partition):
                self._running[record.key] += 1
                return record
            del self._held[record.partition, record.offset]  # its new owner runs it
        return None

    async def _read(self) -> None:
        """Read uploads ahead, up to ``read_ahead`` waiting, into the fair queue."""
        while True:
            while len(self._fair) >= self._read_ahead:
                self._room.clear()
                await self._room.wait()
            records = await self.uploads.next_batch(self._read_ahead - len(self._fair))
            for record in records:
                if (record.partition, record.offset) in self._held:
                    continue  # delivered again, and already here: committed when done
                if not self._takes(record):
                    await commit_or_warn(self.uploads, [record])
                    continue
                tenant, cost = job_tags(record)
                self._held[record.partition, record.offset] = tenant
                self._fair.push(record, tenant=tenant, session=record.key, cost_s=cost)
                JOBS_WAITING.labels(tenant=tenant).inc()
            self._changed.set()

    async def close(self) -> None:
        for task in (self._reader, self._rejob_next):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        for tenant, count in self._fair.backlog().items():  # left to the bus
            JOBS_WAITING.labels(tenant=tenant).dec(count)
        await self.uploads.close()
        await self.rejobs.close()
