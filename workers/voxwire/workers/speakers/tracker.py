"""A live stream's speakers, tracked one final at a time: a pure state machine.

Each final's embedding (its whole audio, :meth:`SpeakerEncoder.embed_utterance`)
is compared with the centroid of every speaker heard so far (cosine
similarity). The nearest speaker takes the final when the similarity reaches
:attr:`TrackerConfig.threshold`; otherwise the final is a new speaker, named
``S1``, ``S2``... in order of appearance, unless it is too short to be trusted
(:attr:`TrackerConfig.min_new_ms`: then the nearest speaker takes it) or the
session's ``max_speakers`` is reached. A speaker's centroid is the mean of its
finals' embeddings, weighted by their length, so it gets steadier as the speaker
talks; nothing else ever changes it, whatever the pause.

Labels are final. A final's ``speaker`` is decided when the final is emitted
and is never changed afterwards: there is no relabelling message, so the
history, the stored transcript and every client agree without applying
corrections. The price: a voice the tracker mistook for a new speaker (or
merged into another) stays so for that final.

Time-free and I/O-free: the caller embeds the audio and passes the vectors in;
:meth:`SpeakerTracker.state` and :meth:`SpeakerTracker.restore` carry the
speakers through a stream checkpoint (another worker goes on with the same
labels). A checkpoint written by a worker with another speaker encoder (its
centroids of another size) keeps its labels; their voices are matched by
nothing until a final is given to them, which they then learn anew.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voxwire.workers.speakers.files import speaker_label

SpeakerState = tuple[tuple[str, tuple[float, ...], float], ...]
"""Per speaker: label, centroid (the sum of its weighted embeddings), weight."""


@dataclass(frozen=True, slots=True)
class TrackerConfig:
    threshold: float = 0.6
    """Cosine similarity to a speaker's centroid at which a final is that speaker's."""
    min_new_ms: int = 1000
    """A final shorter than this never opens a new speaker (when there is one)."""
    max_speakers: int | None = None


@dataclass(slots=True)
class _Speaker:
    label: str
    total: npt.NDArray[np.float64]
    weight: float

    @property
    def centroid(self) -> npt.NDArray[np.float64]:
        norm = float(np.linalg.norm(self.total))
        return self.total / norm if norm > 0 else self.total

    def similarity(self, vector: npt.NDArray[np.float64]) -> float:
        """Cosine similarity to the centroid; -1 for a centroid of another size (a
        checkpoint written with an earlier speaker encoder)."""
        if self.total.shape != vector.shape:
            return -1.0
        return float(self.centroid @ vector)


@dataclass(slots=True)
class SpeakerTracker:
    config: TrackerConfig = field(default_factory=TrackerConfig)
    _speakers: list[_Speaker] = field(default_factory=list)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(s.label for s in self._speakers)

    def assign(
        self, embedding: npt.NDArray[np.float32], duration_ms: int, exclude: Collection[str] = ()
    ) -> str:
        """The speaker of a final of ``duration_ms`` whose unit embedding is ``embedding``;
        not one of ``exclude`` (the other voices found inside the same final) unless the
        session's ``max_speakers`` leaves no other choice."""
        vector = np.asarray(embedding, dtype=np.float64)
        weight = max(duration_ms, 1) / 1000
        best: _Speaker | None = None
        similarity = -1.0
        for speaker in self._speakers:
            value = speaker.similarity(vector)
            if speaker.label not in exclude and value > similarity:
                best, similarity = speaker, value
        full = self.config.max_speakers is not None and len(self) >= self.config.max_speakers
        new = best is None or (
            similarity < self.config.threshold
            and (duration_ms >= self.config.min_new_ms or bool(exclude))
        )
        if full and best is None:
            best = max(self._speakers, key=lambda s: s.similarity(vector))
        elif new and not full:
            best = _Speaker(speaker_label(len(self._speakers)), vector * weight, weight)
            self._speakers.append(best)
            return best.label
        assert best is not None
        if best.total.shape != vector.shape:  # a centroid of another encoder: learnt anew
            best.total, best.weight = np.zeros_like(vector), 0.0
        best.total = best.total + vector * weight
        best.weight += weight
        return best.label

    def __len__(self) -> int:
        return len(self._speakers)

    def state(self) -> SpeakerState:
        return tuple((s.label, tuple(float(x) for x in s.total), s.weight) for s in self._speakers)

    @classmethod
    def restore(cls, config: TrackerConfig, state: SpeakerState) -> SpeakerTracker:
        speakers = [_Speaker(label, np.array(total), weight) for label, total, weight in state]
        return cls(config, speakers)
