"""Whether some worker serves a session's model, asked before the session is accepted.

A model is served by its pool (:mod:`voxwire.wire.pools`): the workers that
consume in that pool's group. :class:`PoolCheck` asks the bus whether the group
of a session's model and lane exists; when it does not, no worker has served
that model (or not for Kafka's offsets retention, 7 days), and the session is
refused at once with :class:`NoWorkerError` (503 over HTTP, an error answer
over MQTT), instead of a job that waits for a worker that may never come. A
group exists in any state but dead: a pool whose workers are all restarting
keeps its group (empty, with its positions), a pool whose workers come and go
has a group that rebalances, so their sessions are still taken and wait in
Kafka, as they always did.

A false refusal is worse than a job that waits, so a yes is remembered: for
``ttl_s`` the bus is not asked again, and a group once seen served stays served
until the bus has said no for ``grace_s`` on end (its coordinator moving, the
group deleted by hand); only then are its sessions refused. A model not served
since this process started is refused at the first no. When the bus cannot say
(Kafka unreachable, a describe that does not answer in time), the session goes
on: producing its job fails with the bus's own error if Kafka stays away.
Requests that arrive while the bus is asked about a group share that question.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial

from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import BusError, VoxwireError
from voxwire.wire.pools import Lane, Pool

log = logging.getLogger(__name__)

_WHAT = {Lane.FILES: "files", Lane.AGAIN: "re-transcriptions", Lane.STREAMS: "live streams"}


class NoWorkerError(VoxwireError):
    """No worker runs the model a session needs, for what it needs it (files,
    re-transcriptions, live streams)."""

    code = "no_worker"


class PoolCheck:
    def __init__(
        self,
        bus: Bus,
        settings: Settings,
        *,
        ttl_s: float = 5.0,
        grace_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bus = bus
        self._default = settings.engine.model
        self._served = settings.served_models
        self._ttl_s = ttl_s
        self._grace_s = grace_s
        self._clock = clock
        self._seen: dict[str, float] = {}  # served group -> when the bus last said yes
        self._gone: dict[str, float] = {}  # served group -> since when the bus says no
        self._asking: dict[str, asyncio.Task[bool]] = {}

    async def require(self, model: str, lane: Lane) -> None:
        """Return when a worker of ``model`` serves ``lane``; else NoWorkerError."""
        group = Pool(model, self._default).group(lane)
        seen = self._seen.get(group)
        if seen is not None and self._clock() - seen < self._ttl_s:
            return
        try:
            exists = await self._exists(group)
        except BusError as exc:
            log.warning("cannot tell whether a worker runs %s: %s", model, exc)
            return
        now = self._clock()
        if exists:
            self._seen[group] = now
            self._gone.pop(group, None)
            return
        if group in self._seen:  # served: refused only once the no has lasted
            if group not in self._gone:
                log.warning("the bus says group %s of served model %s is gone", group, model)
            since = self._gone.setdefault(group, now)
            if now - since < self._grace_s:
                return
            del self._seen[group], self._gone[group]
        others = [name for name in self._served if name != model]
        raise NoWorkerError(
            f"no worker runs model {model!r} for {_WHAT[lane]} now",
            hint="start a worker that serves it (the serve setting), or ask for another "
            "model" + (f" ({', '.join(others)})" if others else ""),
        )

    async def _exists(self, group: str) -> bool:
        """Ask the bus whether ``group`` exists, once for all who ask meanwhile."""
        asking = self._asking.get(group)
        if asking is None:
            asking = asyncio.create_task(self._bus.has_group(group))
            self._asking[group] = asking
            asking.add_done_callback(partial(self._asked, group))
        return await asyncio.shield(asking)

    def _asked(self, group: str, asking: asyncio.Task[bool]) -> None:
        del self._asking[group]
        if not asking.cancelled():
            asking.exception()  # retrieved here too: those who asked may all be gone
