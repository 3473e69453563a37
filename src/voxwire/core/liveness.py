"""Liveness: whether a process still makes progress, watch by watch (``/healthz``).

A process can be up and do nothing: an engine call that never returns (a stuck
decode, a wedged GPU context), an event loop blocked for seconds, a consumer
thread that stopped coming round its loop. ``/healthz`` answers 200 while every
watch is quiet, else 503 with a reason for each that is not, so Kubernetes
restarts the process::

    {"status": "stuck",
     "problems": {"engines": "a faster-whisper call on 12.0 s of audio has run
                              250 s, past its bound of 240 s"}}

A watch is a callable that returns None when all is well, else why not. It only
reads timestamps that the watched parts write (no I/O, no lock held long), so it
may be called from any thread: a worker's probe server answers from a thread of
its own, and can say that the event loop is blocked while it is.

- :class:`LoopWatch`: the event loop has not run a beat for ``bound_s``.
- :class:`Calls`: a call under way (an engine's) has run past the bound it was
  given when it started, derived from what it works on: a long but progressing
  job has a long bound, and an idle process has no call under way at all.
- :class:`Silence`: a connection has heard nothing from its peer for ``bound_s``
  (an MQTT connection: no packet at all, not even the answer to a keepalive
  ping, which an idle but healthy connection gets every keepalive).

``voxwire_liveness_stuck{watch}`` is 1 while a watch reports a problem.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client import Gauge
from pydantic import BaseModel, ConfigDict

Watch = Callable[[], str | None]
"""None while the part it watches makes progress; else why it does not."""

LIVENESS_STUCK = Gauge(
    "voxwire_liveness_stuck",
    "1 while a liveness watch reports that its part stopped making progress (/healthz is 503)",
    ["watch"],
)


class LivenessReport(BaseModel):
    """The body of ``/healthz`` when a watch reports a problem."""

    model_config = ConfigDict(frozen=True)

    status: str
    """``ok`` or ``stuck``."""
    problems: dict[str, str]

    @property
    def alive(self) -> bool:
        return not self.problems

    @property
    def http_status(self) -> int:
        return 200 if self.alive else 503


class Liveness:
    """The watches of one process, by name."""

    def __init__(self) -> None:
        self._watches: dict[str, Watch] = {}

    def add(self, name: str, watch: Watch) -> None:
        """Watch ``name`` with ``watch`` from now on (replacing an earlier one)."""
        self._watches[name] = watch

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._watches)

    def report(self) -> LivenessReport:
        problems: dict[str, str] = {}
        for name, watch in list(self._watches.items()):
            try:
                why = watch()
            except Exception as exc:  # a watch that fails says so, it does not kill the probe
                why = f"the watch failed: {type(exc).__name__}: {exc}"
            LIVENESS_STUCK.labels(name).set(0 if why is None else 1)
            if why is not None:
                problems[name] = why
        return LivenessReport(status="stuck" if problems else "ok", problems=problems)


class LoopWatch:
    """Whether an event loop still runs: :meth:`run` (a task on that loop) beats
    every ``tick_s``; the watch reports a loop that has missed its beat by more
    than ``bound_s``."""

    def __init__(self, bound_s: float = 30.0, tick_s: float = 0.5) -> None:
        if bound_s <= tick_s:
            raise ValueError(f"bound_s ({bound_s}) must exceed tick_s ({tick_s})")
        self.bound_s, self.tick_s = bound_s, tick_s
        self._beat: float | None = None

    async def run(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.tick_s)

    def __call__(self) -> str | None:
        beat = self._beat
        if beat is None:
            return None  # not started: nothing to say
        late = time.monotonic() - beat - self.tick_s
        if late <= self.bound_s:
            return None
        return f"the event loop has not run for {late:.0f} s (bound {self.bound_s:.0f} s)"


class Calls:
    """Calls under way that must each end within the bound they started with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._running: dict[int, tuple[str, float, float]] = {}  # id -> (what, started, bound)

    @contextmanager
    def running(self, what: str, bound_s: float) -> Iterator[None]:
        """While the block runs, ``what`` is a call under way that should end
        within ``bound_s`` seconds (from any thread)."""
        with self._lock:
            key = next(self._ids)
            self._running[key] = (what, time.monotonic(), bound_s)
        try:
            yield
        finally:
            with self._lock:
                del self._running[key]

    @property
    def under_way(self) -> int:
        with self._lock:
            return len(self._running)

    def __call__(self) -> str | None:
        now = time.monotonic()
        with self._lock:
            late = [
                (now - started, what, bound)
                for what, started, bound in self._running.values()
                if now - started > bound
            ]
        if not late:
            return None
        took, what, bound = max(late)
        more = f" (and {len(late) - 1} more)" if len(late) > 1 else ""
        return f"{what} has run {took:.0f} s, past its bound of {bound:.0f} s{more}"


class Silence:
    """A connection that must hear from its peer at least every ``bound_s`` while
    watched: :meth:`heard` is called (from any thread) for everything the peer
    sends; the watch reports a connection silent for longer than the bound, be it
    connected or reconnecting. The clock starts at :meth:`watch` (the first
    connection attempt) and stops at :meth:`unwatch` (closed on purpose)."""

    def __init__(self, what: str, bound_s: float) -> None:
        if bound_s <= 0:
            raise ValueError(f"bound_s ({bound_s}) must be positive")
        self.what, self.bound_s = what, bound_s
        self._heard = time.monotonic()
        self._watched = False

    def watch(self) -> None:
        """Start the clock, unless it runs already (a second connect keeps its start)."""
        if not self._watched:
            self._heard = time.monotonic()
            self._watched = True

    def heard(self) -> None:
        self._heard = time.monotonic()

    def unwatch(self) -> None:
        self._watched = False

    def __call__(self) -> str | None:
        if not self._watched:
            return None
        silent = time.monotonic() - self._heard
        if silent <= self.bound_s:
            return None
        return (
            f"{self.what} has heard nothing for {silent:.0f} s, not even a keepalive "
            f"answer (bound {self.bound_s:.0f} s)"
        )
