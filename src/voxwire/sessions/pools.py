"""Whether some worker serves a session's model, asked before the session is accepted.

A model is served by its pool (:mod:`voxwire.wire.pools`): the workers that
consume in that pool's group. :class:`PoolCheck` asks the bus whether the group
of a session's model and lane exists; when it does not, no worker has served
that model (or not for Kafka's offsets retention, 7 days), and the session is
refused at once with :class:`NoWorkerError` (503 over HTTP, an error answer
over MQTT), instead of a job that waits for a worker that may never come. A
pool whose workers are all restarting keeps its group (empty, with its
positions), so its sessions are still taken and wait in Kafka, as they always
did. A yes is remembered for ``ttl_s``; a no is asked again on the next
request. When the bus cannot say (Kafka unreachable), the session goes on:
producing its job fails with the bus's own error if Kafka stays away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bus = bus
        self._default = settings.engine.model
        self._served = settings.served_models
        self._ttl_s = ttl_s
        self._clock = clock
        self._seen: dict[str, float] = {}  # group -> when a member was last seen

    async def require(self, model: str, lane: Lane) -> None:
        """Return when a worker of ``model`` serves ``lane``; else NoWorkerError."""
        group = Pool(model, self._default).group(lane)
        seen = self._seen.get(group)
        if seen is not None and self._clock() - seen < self._ttl_s:
            return
        try:
            serving = await self._bus.has_group(group)
        except BusError as exc:
            log.warning("cannot tell whether a worker runs %s: %s", model, exc)
            return
        if serving:
            self._seen[group] = self._clock()
            return
        self._seen.pop(group, None)
        others = [name for name in self._served if name != model]
        raise NoWorkerError(
            f"no worker runs model {model!r} for {_WHAT[lane]} now",
            hint="start a worker that serves it (the serve setting), or ask for another "
            "model" + (f" ({', '.join(others)})" if others else ""),
        )
