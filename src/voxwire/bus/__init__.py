"""The job bus: topics of keyed records between gateway, workers and relay.

The in-process bus (:class:`MemoryBus`) has the same interface as the Kafka
bus of distributed mode. Topics are named as in Kafka::

    transcription.jobs     key = sid, a FileJob (JSON)
    transcription.results  key = sid, a wire message (JSON)
    transcription.windows  key = sid, a window of committed text (voxwire.wire.windows)
"""

from voxwire.bus.base import (
    Bus,
    Record,
    Subscription,
    commit_or_warn,
)
from voxwire.bus.memory import MemoryBus

__all__ = [
    "Bus",
    "MemoryBus",
    "Record",
    "Subscription",
    "commit_or_warn",
]
