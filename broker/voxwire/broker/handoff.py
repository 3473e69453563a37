"""Handing results from paho's network thread to their waiters.

paho calls back on its own network thread; voxwire's services wait on an
asyncio loop or, for blocking calls, on a :class:`concurrent.futures.Future`.

- :class:`LoopBridge` is the one crossing from paho's thread into asyncio: it
  schedules a call on the loop, and drops it once the loop has closed (nobody
  waits any more).
- An :class:`Ack` is told once per publish whether the broker acknowledged it
  (error ``None``) or not: :class:`FutureAck` completes a concurrent future,
  :class:`BatchAck` counts a batch down and resolves one asyncio future through
  the bridge, one wake-up of the loop for the whole batch (a future per message
  cost more than the publish itself), and :data:`NO_ACK` ignores the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Protocol, TypeVar

from voxwire.core.errors import MqttError

T = TypeVar("T")


class LoopBridge:
    """Runs callables on one asyncio loop, called from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def post(self, call: Callable[[T], object], argument: T) -> None:
        """Schedule ``call(argument)`` on the loop; nothing when the loop is closed."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(call, argument)


class Ack(Protocol):
    """Told once per message whether the broker acknowledged it (error None) or not."""

    def settle(self, error: MqttError | None) -> None: ...


class _NoAck:
    def settle(self, error: MqttError | None) -> None:
        return None


NO_ACK: Ack = _NoAck()


class FutureAck:
    """Completes a concurrent future, which any thread or loop may wait on."""

    def __init__(self, future: Future[None]) -> None:
        self.future = future

    def settle(self, error: MqttError | None) -> None:
        with contextlib.suppress(InvalidStateError):  # cancelled by the caller
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)


class BatchAck:
    """Counts a batch's acknowledgements down; resolves one asyncio future at zero."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self._bridge = LoopBridge(loop)
        self._left = count
        self._error: MqttError | None = None
        self._lock = threading.Lock()
        if not count:
            self.future.set_result(None)

    def settle(self, error: MqttError | None) -> None:
        with self._lock:
            self._left -= 1
            if error is not None and self._error is None:
                self._error = error
            if self._left:
                return
            outcome = self._error
        self._bridge.post(self._resolve, outcome)

    def _resolve(self, error: MqttError | None) -> None:
        if self.future.done():
            return
        if error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(error)
