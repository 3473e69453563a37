"""Model pools: the workers that run one model, each pool a consumer group of its own.

A worker process runs one pool per model it serves (the ``serve`` setting,
every served model when empty). A pool reads the upload jobs, the
re-transcriptions and the live audio in groups of its own and keeps only the
sessions of its model; the other records it passes over and commits. So the
workers of ``base`` and those of ``tiny.en`` scale apart, each group sharing its
topic's partitions among its own workers only.

The default model's pool (the ``model`` setting) keeps the plain group names
(``voxwire-workers``, ``voxwire-workers-rejobs``, ``voxwire-streams``), so an
installation of one model is what it always was; another model's groups end in
its name (``voxwire-workers.base``, ``voxwire-workers.base-rejobs``). A record
that names no model (written before sessions named theirs) belongs to the
default pool.

Every pool reads the whole audio topic: a live stream is at most 256 kbit/s of
PCM, little beside what decoding it costs, and it keeps one topic for clients'
audio whatever the model (the bridge need not know a session's model).

Before a session is accepted, the gateway asks the bus whether its pool's group
exists (:meth:`voxwire.bus.base.Bus.has_group`): a model that no worker serves
is refused at once (``no_worker``, 503) rather than left waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

WORKER_GROUP = "voxwire-workers"
"""The upload jobs' group (``transcription.jobs``)."""
REJOBS_SUFFIX = "-rejobs"
"""The re-transcriptions' group (``transcription.rejobs``) is the jobs' group and this."""
STREAM_GROUP = "voxwire-streams"
"""The live audio's group (``transcription.audio``)."""


class Lane(StrEnum):
    """What a session needs a worker for, and the group that does it."""

    FILES = WORKER_GROUP
    AGAIN = WORKER_GROUP + REJOBS_SUFFIX
    STREAMS = STREAM_GROUP


@dataclass(frozen=True, slots=True)
class Pool:
    """The workers of ``model`` on a platform whose default model is ``default``."""

    model: str
    default: str

    def takes(self, model: str | None) -> bool:
        """Whether a session of ``model`` (None: the default) is this pool's."""
        return (model or self.default) == self.model

    def group(self, lane: Lane) -> str:
        """This pool's group for ``lane``."""
        if lane is Lane.AGAIN:
            return self.group(Lane.FILES) + REJOBS_SUFFIX
        return lane.value if self.model == self.default else f"{lane.value}.{self.model}"
