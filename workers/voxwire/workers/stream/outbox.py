"""A live session's way out to the bus, owned by the event loop.

A :class:`~voxwire.workers.stream.session.StreamSession` sends nothing: it
returns the messages it decided and the resume point after them
(:class:`~voxwire.workers.stream.session.Outbound`). The worker hands them to
the session's :class:`Outbox`, which saves the checkpoint first
(:meth:`StreamCheckpoint.ahead_of <voxwire.workers.stream.checkpoints.StreamCheckpoint.ahead_of>`),
then produces the messages on the results topic, and after a final the text
windows it changed. Handing in takes a place in the session's line at once,
before anything is awaited, and the line goes out one after another in that
order: messages handed in as their seqs were given go out in seq order,
whichever task awaits them. Nothing waits in the line but for the session's
own earlier messages.

A session whose partition went to another worker sends nothing more (its new
owner resumes it from the last checkpoint). A failed save or produce is the
session's error (its sid attached): the outbox sends nothing more, and every
later hand-in raises it again; the worker then ends, and another resumes the
session from the checkpoint, which was saved before the messages it covers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from voxwire.bus import Bus
from voxwire.core.errors import VoxwireError
from voxwire.wire.topics import RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import windows_after
from voxwire.workers.stream.checkpoints import Checkpoints, StreamCheckpoint
from voxwire.workers.stream.session import Outbound, Resume
from voxwire_client.messages import Message, SegmentData, SegmentMessage, encode_message

_Step = Callable[[], Awaitable[None]]


class Outbox:
    """One live session's messages to the bus, checkpoint first, in order."""

    def __init__(
        self,
        sid: str,
        start: bytes,
        bus: Bus,
        checkpoints: Checkpoints,
        *,
        owned: Callable[[], bool] = lambda: True,
        settled: int | None = None,
    ) -> None:
        """``start``: the session's start record, saved with each checkpoint.
        ``owned``: whether this worker still owns the session (asked before each
        step). ``settled``: the resume chunk of the checkpoint already saved."""
        self.sid = sid
        self.start = start
        self._bus, self._checkpoints, self._owned = bus, checkpoints, owned
        self.settled = settled
        """The resume chunk of the last checkpoint saved: the audio before it is settled."""
        self.moved = False
        """The session went to another worker: nothing more goes out here."""
        self.failed: Exception | None = None
        """The save or produce that failed: nothing more goes out."""
        self._line: deque[tuple[_Step, asyncio.Future[bool]]] = deque()
        self._sending = False

    def send(self, out: Outbound) -> Awaitable[bool]:
        """Hand in what the session decided: its checkpoint saved, then its
        messages produced, after everything handed in before. Await the result:
        True once they are out, False when the session moved to another worker
        (nothing of it, nor after it, is sent); raises the failed save's or
        produce's error, the session's id attached."""
        return self._queue(partial(self._save_and_produce, out))

    def resend(self, checkpoint: StreamCheckpoint) -> Awaitable[bool]:
        """Hand in the message of the checkpoint a worker taking the session
        over loaded (the crash may have come before it reached the bus): it is
        produced again, the checkpoint is not saved again."""
        if checkpoint.last is None:
            return self._queue(_nothing)
        messages = (checkpoint.last,)
        return self._queue(partial(self._produce, messages, checkpoint.resume.finals))

    def close(self, resume: Resume) -> Awaitable[bool]:
        """Hand in the session's last checkpoint: every message is out, nothing to resume."""
        done = StreamCheckpoint(self.start, resume, None, done=True)
        return self._queue(partial(self._checkpoints.save, self.sid, done))

    def _queue(self, step: _Step) -> Awaitable[bool]:
        """Put ``step`` in line now; the returned awaitable sends the line
        (unless another task is sending it) until ``step``'s turn is over."""
        turn: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._line.append((step, turn))
        return self._after(turn)

    async def _after(self, turn: asyncio.Future[bool]) -> bool:
        if not self._sending:
            self._sending = True
            try:
                await self._send_line()
            finally:
                self._sending = False
        return await turn

    async def _send_line(self) -> None:
        while self._line:
            step, turn = self._line.popleft()
            try:
                sent = await self._take_turn(step)
            except asyncio.CancelledError:  # the worker stops: nothing more goes out
                for _, waiting in [(step, turn), *self._line]:
                    waiting.cancel()
                self._line.clear()
                raise
            except Exception as exc:
                if not turn.done():  # done: its task was cancelled
                    turn.set_exception(exc)
            else:
                if not turn.done():
                    turn.set_result(sent)

    async def _take_turn(self, step: _Step) -> bool:
        if self.failed is not None:
            raise self.failed
        if self.moved or not self._owned():
            self.moved = True
            return False
        try:
            await step()
        except Exception as exc:
            if isinstance(exc, VoxwireError):
                exc.sid = exc.sid or self.sid
            self.failed = exc
            raise
        return True

    async def _save_and_produce(self, out: Outbound) -> None:
        if not out.messages:
            return
        await self._checkpoints.save(self.sid, StreamCheckpoint.ahead_of(self.start, out))
        self.settled = out.resume.chunk
        await self._produce(out.messages, out.resume.finals)

    async def _produce(self, messages: Sequence[Message], finals: Sequence[SegmentData]) -> None:
        """The messages to the results; after a final, the windows it changed."""
        for message in messages:
            await self._bus.produce(RESULTS_TOPIC, self.sid, encode_message(message))
        if any(isinstance(m, SegmentMessage) and m.type == "final" for m in messages):
            for window in windows_after(finals, self.sid):
                await self._bus.produce(WINDOWS_TOPIC, self.sid, window.encode())


async def _nothing() -> None:
    pass
