"""Which audio and queries the ingest forwards when installations share a broker.

Two installations on one broker (each with its namespace: Kafka topics,
PostgreSQL schema, bridge group) both receive every client's
``audio/<sid>/...``: the topic names no installation, and devices publish on it
as documented. The ingest forwards a message of a session's audio topics only
when the session is this installation's, that is when its store has it; others'
are acknowledged and dropped (counted in ``voxwire_ingest_foreign_messages``),
so no installation's Kafka log holds another's audio. The ingest keeps a second
gate for ``query/<key id>/...`` (requests, and parts of files uploaded over MQTT),
asking whether this installation issued the key: a key is stored before anyone
can use it, and stays issued when revoked (the revoked key's error comes from
its own installation).

A session is in the store before its client learns its sid: the gateway and
the MQTT stream request both create it, and open its topics to the client,
before they answer. So the first chunk of a stream already finds it, and a sid
the store does not have is another installation's. Answers are kept:
:class:`Verdicts` keeps "ours" as long as the sid keeps coming (a session never
changes installation, takeover by another worker included), least recently
used first out, and "not ours" briefly (``negative_ttl_s``).

Order: the messages of a sid that is being looked up wait, in arrival order,
and are decided together once the answer is in; until then later ones of that
sid queue behind them. The decision is handed back synchronously, in order, so
the ingest forwards them exactly as it would without the check. A lookup the
store fails is retried, the messages held (unacknowledged) meanwhile, as they
are while Kafka is down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from voxwire.core.errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

CAPACITY = 50_000
"""How many sids each side of :class:`Verdicts` keeps."""
NEGATIVE_TTL_S = 2.0
"""How long "not ours" is believed before the store is asked again."""


class Verdicts:
    """Known answers to "is sid ours?", with no I/O and the clock passed in."""

    def __init__(self, capacity: int = CAPACITY, negative_ttl_s: float = NEGATIVE_TTL_S) -> None:
        if capacity < 1 or negative_ttl_s < 0:
            raise ValueError("capacity must be positive and negative_ttl_s not negative")
        self._capacity = capacity
        self._ttl = negative_ttl_s
        self._ours: OrderedDict[str, None] = OrderedDict()
        self._theirs: OrderedDict[str, float] = OrderedDict()  # sid -> believed until

    def get(self, sid: str, now: float) -> bool | None:
        """True (ours), False (another installation's) or None (ask the store)."""
        if sid in self._ours:
            self._ours.move_to_end(sid)
            return True
        until = self._theirs.get(sid)
        if until is None:
            return None
        if now < until:
            return False
        del self._theirs[sid]
        return None

    def put(self, sid: str, ours: bool, now: float) -> None:
        if ours:
            self._theirs.pop(sid, None)
            self._ours[sid] = None
            self._ours.move_to_end(sid)
            if len(self._ours) > self._capacity:
                self._ours.popitem(last=False)
            return
        self._theirs[sid] = now + self._ttl
        self._theirs.move_to_end(sid)
        if len(self._theirs) > self._capacity:
            self._theirs.popitem(last=False)


class SessionGate(Generic[T]):
    """Decides, per sid and in arrival order, whether messages are ours.

    ``is_ours(sid)`` asks the store; ``decide(message, ours)`` is called once per
    admitted message, in the order :meth:`admit` saw them for that sid, on the
    event loop (at once when the answer is known, else once the store answered).
    """

    def __init__(
        self,
        is_ours: Callable[[str], Awaitable[bool]],
        decide: Callable[[T, bool], None],
        *,
        verdicts: Verdicts | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_s: tuple[float, float] = (0.5, 10.0),
    ) -> None:
        self._is_ours = is_ours
        self._decide = decide
        self._verdicts = verdicts or Verdicts()
        self._clock = clock
        self._retry_s = retry_s
        self._waiting: dict[str, list[T]] = {}
        self._lookups: set[asyncio.Task[None]] = set()
        self.lookups = 0
        """How many times the store was asked (a figure for tests and benchmarks)."""

    def admit(self, sid: str, message: T) -> None:
        """Decide ``message`` of session ``sid`` now, or once the store answered."""
        waiting = self._waiting.get(sid)
        if waiting is not None:  # a lookup runs: behind the messages it holds
            waiting.append(message)
            return
        ours = self._verdicts.get(sid, self._clock())
        if ours is not None:
            self._decide(message, ours)
            return
        self._waiting[sid] = [message]
        task = asyncio.get_running_loop().create_task(self._look_up(sid), name=f"owner {sid}")
        self._lookups.add(task)
        task.add_done_callback(self._lookups.discard)

    async def _look_up(self, sid: str) -> None:
        delay, longest = self._retry_s
        while True:
            self.lookups += 1
            try:
                ours = await self._is_ours(sid)
                break
            except StoreError as exc:  # the store is away: hold the messages
                log.warning("bridge ingest: whose session is %s? (%s); retrying", sid, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
        self._verdicts.put(sid, ours, self._clock())
        for message in self._waiting.pop(sid):
            self._decide(message, ours)

    def close(self) -> None:
        """Stop the lookups; the messages they held stay unacknowledged (the
        broker delivers them again to the next connection)."""
        for task in self._lookups:
            task.cancel()
        self._waiting.clear()
