"""A consumer's membership of its group, and its replacement when librdkafka
does not bring it back.

When Kafka is unreachable for longer than the session timeout, librdkafka
reports the consumer's partitions lost and rejoins the group once the brokers
are back. After a broker restart under load, a consumer was seen never to
rejoin: no assignment and no event for minutes, while the other consumers of
the same process had theirs back within seconds, and its records waited for
ever. :class:`Membership` notices a consumer that has had no assignment for
``rejoin_s`` since it lost its partitions, so that the subscription replaces it
with a new member of the same group, which starts from the committed positions
(at least once, as after any rebalance). Each further replacement waits twice as
long as the one before: a join that a replacement interrupts starts over.

Callbacks are bound to the consumer they were registered with
(:meth:`Membership.bind`): once it is replaced, what the old consumer still
reports (while it is closed on a thread of its own) changes nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException

log = logging.getLogger(__name__)

MAX_DOUBLINGS = 4
"""A replacement consumer is given at most ``2**MAX_DOUBLINGS`` times ``rejoin_s``."""


@dataclass(slots=True)
class Membership:
    """The consumer thread's record of its consumer (used by that thread only,
    except :meth:`stalled_for`, which any thread may read)."""

    config: dict[str, Any]
    rejoin_s: float
    generation: int = 0
    lost_at: float | None = None
    renewals: int = 0
    """Consumers made since the partitions were lost: each new one is given twice
    the time the one before had (a join and its rebalance may take longer than
    ``rejoin_s`` once the brokers are back, and a member replaced before it is in
    starts the rebalance over: replacing at a fixed pace never lets it finish)."""
    beat: float = field(default_factory=time.monotonic)
    """When the thread last came round its loop."""
    stall_reported: bool = False

    def bind(self, callback: Callable[..., None]) -> Callable[..., None]:
        """``callback``, a no-op once the consumer it is registered with is replaced."""
        generation = self.generation

        def call(*args: Any) -> None:
            if self.generation == generation:
                callback(*args)

        return call

    def lost(self) -> None:
        if self.lost_at is None:
            self.lost_at = time.monotonic()

    def assigned(self) -> None:
        self.lost_at = None
        self.renewals = 0

    def wait_s(self) -> float:
        """How long the present consumer is given to get partitions back:
        ``rejoin_s``, doubled for each consumer made since they were lost (at most
        :data:`MAX_DOUBLINGS` times)."""
        return self.rejoin_s * (1 << min(self.renewals, MAX_DOUBLINGS))

    def overdue(self) -> bool:
        """Whether the partitions lost have not come back within :meth:`wait_s`."""
        return self.lost_at is not None and time.monotonic() - self.lost_at >= self.wait_s()

    def renewed(self) -> None:
        """A new consumer replaced the old one; it gets twice the time to join."""
        self.generation += 1
        self.renewals += 1
        self.lost_at = time.monotonic()

    def stalled_for(self) -> float:
        return time.monotonic() - self.beat


def close_in_background(consumer: Consumer, topic: str) -> None:
    """Close a replaced consumer on a thread of its own: a consumer that does not
    rejoin may not leave quickly either, and nothing waits for it."""

    def close() -> None:
        try:
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.debug("closing a replaced consumer of %s: %s", topic, exc)

    threading.Thread(target=close, name=f"kafka-close-{topic}", daemon=True).start()


def stack_of(thread: threading.Thread) -> str:
    """Where ``thread`` is now (for a report on a stuck consumer thread)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"
