"""What a live session hands back, as values: the messages it decided and
where the stream stands after them (:class:`Outbound`, :class:`Resume`: what a
checkpoint keeps), and what an engine's thread made of a taken item
(:class:`Decoded`) for :meth:`StreamSession.commit
<voxwire.workers.stream.session.StreamSession.commit>`."""

from __future__ import annotations

from dataclasses import dataclass

from voxwire.workers.engine import Segment
from voxwire.workers.speakers.files import Piece
from voxwire.workers.speakers.live import SpeakerState
from voxwire_client.api import PromptSpec
from voxwire_client.messages import Message, SegmentData


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a stream stands after messages it returned: what another worker
    needs to go on from there without repeating or losing a final (see
    :mod:`voxwire.workers.stream.worker`). The audio before the point is
    settled: finals cover it, or it held no words."""

    next_seq: int
    finals: tuple[SegmentData, ...] = ()
    chunk: int = 0
    """The first chunk holding audio that is not settled."""
    skip_samples: int = 0
    """Samples at the start of that chunk that are settled."""
    stream_sample: int = 0
    """The stream time of the point, in samples."""
    pending: tuple[Message, ...] = ()
    """Messages decided with the last one (a final's matches, the completion),
    seq already given: sent first on resuming."""
    finished: bool = False
    """The transcript was emitted: nothing more but ``pending``."""
    prompts: tuple[PromptSpec, ...] | None = None
    """The standing prompts, when changed since the start (None: the start's)."""
    speakers: SpeakerState = ()
    tracks: tuple[int, ...] = ()
    """With separate channels: the stream sample each channel is settled to (the
    point above is the earliest of them); a channel's finals before its own are
    not decided again."""
    early: tuple[tuple[int, int] | None, ...] = ()
    """Per channel, the early close its speech may still go on with (ms: where
    the pause began, where the utterance began); () when none: a worker that
    takes the stream over marks the next final ``continues`` as this one would."""


Outcome = list[Segment] | BaseException | None
"""What the engine made of an item: its segments, the exception it raised, or
None when the item needed no engine."""

Speakers = tuple[tuple[Piece, ...], SpeakerState]
"""A final's pieces, one speaker each, and the speakers' state after them."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """What an engine's thread made of a taken item, for :meth:`StreamSession.commit`."""

    outcome: Outcome
    started: float
    """When the engine began on it (the end of its wait in the queue)."""
    finished: float | None = None
    """When the engine was done (None: no engine ran)."""
    speakers: Speakers | None = None
    """A diarized final's speakers, found on the engine's thread
    (:meth:`StreamSession.speakers_of`); None: the commit finds them."""


@dataclass(frozen=True, slots=True)
class Outbound:
    """Messages a session decided together (their seqs given, to send in this
    order) and where the stream stands after them. The caller saves the
    checkpoint before it sends the first: that message as the checkpoint's
    last, the others as its pending
    (:meth:`~voxwire.workers.stream.checkpoints.StreamCheckpoint.ahead_of`)."""

    messages: tuple[Message, ...]
    resume: Resume
