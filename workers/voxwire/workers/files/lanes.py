"""Two lanes of file jobs: new uploads first, re-transcriptions only when quiet.

A worker reads ``transcription.jobs`` (uploads) and ``transcription.rejobs``
(re-transcriptions, :mod:`voxwire_client.versions`) through :class:`JobLanes`.
:meth:`JobLanes.next` hands out an upload whenever one is there; a
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
from collections import deque
from collections.abc import Callable

from voxwire.bus import Record, Subscription

_RECHECK_S = 0.25
"""How often a waiting re-transcription looks again whether the worker is quiet."""


class JobLanes:
    def __init__(self, uploads: Subscription, again: Subscription) -> None:
        self.uploads = uploads
        self.rejobs = again
        self._upload_next: asyncio.Task[Record] | None = None
        self._rejob_next: asyncio.Task[Record] | None = None
        self._yielded: deque[Record] = deque()

    def upload_waiting(self) -> bool:
        """An upload arrived that no engine took yet."""
        task = self._upload_next
        return task is not None and task.done()

    def must_yield(self, quiet: Callable[[], bool]) -> bool:
        """Whether a re-transcription under way should give its engine back now."""
        return self.upload_waiting() or not quiet()

    def again(self, record: Record) -> None:
        """A re-transcription that yielded: first in its lane."""
        self._yielded.appendleft(record)

    async def next(self, quiet: Callable[[], bool]) -> tuple[Record, bool]:
        """The next job, and whether it is a re-transcription."""
        while True:
            if self._upload_next is None:
                self._upload_next = asyncio.create_task(self.uploads.next())
            if self._upload_next.done():
                task, self._upload_next = self._upload_next, None
                return task.result(), False
            waits: set[asyncio.Task[Record]] = {self._upload_next}
            if quiet():
                if self._yielded:
                    return self._yielded.popleft(), True
                if self._rejob_next is None:
                    self._rejob_next = asyncio.create_task(self.rejobs.next())
                if self._rejob_next.done():
                    task, self._rejob_next = self._rejob_next, None
                    return task.result(), True
                waits.add(self._rejob_next)
            await asyncio.wait(waits, timeout=_RECHECK_S, return_when=asyncio.FIRST_COMPLETED)

    async def close(self) -> None:
        for task in (self._upload_next, self._rejob_next):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await self.uploads.close()
        await self.rejobs.close()
