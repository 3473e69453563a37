"""Engine time shared fairly among tenants: start-time fair queuing (no I/O).

A worker reads file jobs ahead of its engines (:mod:`voxwire.workers.files.lanes`)
and keeps them here, one first-in-first-out queue per tenant. Which job runs
next is decided by start-time fair queuing (Goyal, Vin and Cheng, 1996) over
audio seconds, the cost of a job:

- every job gets a *start tag* when it arrives: the later of the queue's
  virtual time and the *finish tag* of its tenant's previous job; its finish
  tag is its start tag plus its cost (audio seconds / the tenant's weight);
- the next job is the tenant head with the smallest start tag (then the
  smallest finish tag, then the earliest arrival); the virtual time becomes its
  start tag.

So a tenant that queues a thousand jobs gets tags far in the future, one job's
cost apart, and a tenant that then queues one job gets a start tag equal to
the virtual time: it runs as soon as an engine is free, after at most the one
job each engine is already running. Two tenants with backlogs share engine
time in proportion to their weights (1 by default), in audio seconds, not in
job counts; a tenant that was idle gets no credit for it.

Within a tenant, jobs start in arrival order, and a job whose session has a
job running waits (:meth:`FairQueue.pop`'s ``running``), so the jobs of a
session never overlap or overtake each other.

The bus stays the durable source of truth: nothing here is committed; a job
read ahead and not run is delivered again to whichever worker owns its
partition next.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

MIN_COST_S = 1.0
"""The least a job costs, in audio seconds: a job of no audio still takes an engine."""


@dataclass(frozen=True, slots=True)
class Queued(Generic[T]):
    item: T
    tenant: str
    session: str
    start: float
    finish: float
    arrival: int


class FairQueue(Generic[T]):
    """Jobs of many tenants, handed out fairly (see the module doc)."""

    def __init__(
        self, weights: Mapping[str, float] | None = None, *, in_arrival_order: bool = False
    ) -> None:
        """``weights``: a tenant's share against others' (1 when absent);
        ``in_arrival_order``: not fair, first come first served (the baseline)."""
        self._weights = dict(weights or {})
        self._in_arrival_order = in_arrival_order
        self._queues: dict[str, deque[Queued[T]]] = {}
        self._last_finish: dict[str, float] = {}
        self._virtual = 0.0
        self._arrivals = 0

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def backlog(self) -> dict[str, int]:
        """Jobs waiting, by tenant (tenants with none left out)."""
        return {tenant: len(queue) for tenant, queue in self._queues.items() if queue}

    def push(self, item: T, *, tenant: str, session: str, cost_s: float) -> None:
        weight = self._weights.get(tenant, 1.0)
        start = max(self._virtual, self._last_finish.get(tenant, 0.0))
        finish = start + max(cost_s, MIN_COST_S) / weight
        self._last_finish[tenant] = finish
        self._arrivals += 1
        queued = Queued(item, tenant, session, start, finish, self._arrivals)
        self._queues.setdefault(tenant, deque()).append(queued)

    def pop(self, running: Container[str] = ()) -> T | None:
        """The next job to run, or None when none may: the queue is empty, or
        every tenant's next job belongs to a session in ``running``."""
        heads = [
            queue[0] for queue in self._queues.values() if queue and queue[0].session not in running
        ]
        if not heads:
            return None
        if self._in_arrival_order:
            chosen = min(heads, key=lambda q: q.arrival)
        else:
            chosen = min(heads, key=lambda q: (q.start, q.finish, q.arrival))
        self._queues[chosen.tenant].popleft()
        self._virtual = max(self._virtual, chosen.start)
        return chosen.item
