"""Readiness: whether a process can do its work now, dependency by dependency.

``/healthz`` says the process is alive and answers without looking at anything;
``/readyz`` asks each dependency this process uses (Kafka, PostgreSQL, Redis,
OpenSearch, the MQTT broker, the engines) and answers 200 when all of them are
ready, else 503, with a reason for each::

    {"status": "not ready",
     "checks": {"kafka": {"ok": false, "reason": "KafkaException: ... timed out"},
                "postgres": {"ok": true, "reason": "ok"}}}

A check is a coroutine function that returns a short note or raises; every
check runs at once, each within ``timeout_s`` (one that takes longer is not
ready, "no answer within 2.0 s"), so a dead dependency never holds the answer
up. A check that must block (a client library without asyncio) runs its call in
a thread. Checks are registered as a process opens what it depends on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from voxwire.core.errors import VoxwireError

Check = Callable[[], Awaitable[str | None]]
"""Returns a note (None: "ok") when the dependency answers; raises when it does not."""

HEALTH_PATH = "/healthz"
"""Liveness: the process answers (it looks at nothing else)."""
READY_PATH = "/readyz"
"""Readiness: every dependency answers (:class:`ReadinessReport`)."""
METRICS_PATH = "/metrics"
"""Prometheus text."""

DEFAULT_TIMEOUT_S = 2.0
_REASON_CHARS = 240


@runtime_checkable
class Pingable(Protocol):
    """An adapter that can say whether its server answers (a cheap round trip)."""

    async def ping(self) -> str | None: ...


@dataclass(slots=True)
class Flag:
    """A part of this process that is not ready while :attr:`why` says why
    (``Readiness.add_flag(name, flag)``); set it to None once ready."""

    why: str | None

    def __call__(self) -> str | None:
        return self.why


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    ok: bool
    reason: str


class ReadinessReport(BaseModel):
    """The body of ``/readyz``."""

    model_config = ConfigDict(frozen=True)

    status: str
    """``ready`` or ``not ready``."""
    checks: dict[str, CheckResult]

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def http_status(self) -> int:
        return 200 if self.ready else 503


class Readiness:
    """The checks of one process, by dependency name."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Check ``name`` with ``check`` from now on (replacing an earlier one)."""
        self._checks[name] = check

    def add_flag(self, name: str, state: Callable[[], str | None]) -> None:
        """A check on this process's own state: ``state()`` is None when ready, else
        why not (no I/O: it is called on the event loop)."""

        async def check() -> str | None:
            why = state()
            if why is not None:
                raise NotReadyError(why)
            return None

        self.add(name, check)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._checks)

    async def report(self) -> ReadinessReport:
        names = list(self._checks)
        results = await asyncio.gather(*(self._run(self._checks[n]) for n in names))
        checks = dict(zip(names, results, strict=True))
        ready = all(result.ok for result in checks.values())
        return ReadinessReport(status="ready" if ready else "not ready", checks=checks)

    async def _run(self, check: Check) -> CheckResult:
        try:
            note = await asyncio.wait_for(check(), self.timeout_s)
        except TimeoutError:
            return CheckResult(ok=False, reason=f"no answer within {self.timeout_s:g} s")
        except Exception as exc:  # any failure of a dependency is a reason, not a crash
            return CheckResult(ok=False, reason=describe(exc))
        return CheckResult(ok=True, reason=note or "ok")


class NotReadyError(VoxwireError):
    """A part of this process is not ready yet (starting, loading, disconnected)."""

    code = "not_ready"


def describe(exc: BaseException) -> str:
    """One line about ``exc``: the message of a voxwire error, else its type and message."""
    text = exc.message if isinstance(exc, VoxwireError) else f"{type(exc).__name__}: {exc}"
    line = " ".join(text.split())
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 1] + "…"
