"""Speaker attribution error: how much of a transcript a user sees under the
wrong speaker.

A diarized session's finals carry a ``speaker`` label (S1, S2...). Against the
reference turns of the audio (who really spoke when), each word of each final
gets the reference speaker of its time: the turn it overlaps most, or the
nearest turn when it falls in a gap. Word times come from the final's
``words`` where the engine gave them, else the final's span is shared evenly
among its words. The labels are then mapped onto the reference speakers one to
one, the mapping that puts the most words right (Hungarian assignment); a label
left without a reference speaker (more speakers found than there are) and a
final without a label count as wrong. The error is the share of words wrong;
the same mapping also scores whole finals (a final is right when its label
maps to the reference speaker of most of its words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from voxwire_client.messages import SegmentData

NO_LABEL = "?"


@dataclass(frozen=True, slots=True)
class RefTurn:
    """One reference speaker talking, in ms from the start of the audio."""

    start_ms: int
    end_ms: int
    speaker: str


@dataclass(frozen=True, slots=True)
class Attribution:
    words: int
    wrong_words: int
    finals: int
    wrong_finals: int
    speakers: int
    """Distinct labels on the finals."""

    @property
    def error(self) -> float:
        """Share of words attributed to the wrong speaker (0 with no words)."""
        return self.wrong_words / self.words if self.words else 0.0

    @property
    def final_error(self) -> float:
        return self.wrong_finals / self.finals if self.finals else 0.0


def _word_spans(segment: SegmentData) -> list[tuple[int, int]]:
    if segment.words:
        return [(w.start_ms, max(w.end_ms, w.start_ms)) for w in segment.words]
    count = len(segment.text.split())
    step = (segment.end_ms - segment.start_ms) / max(1, count)
    return [
        (round(segment.start_ms + k * step), round(segment.start_ms + (k + 1) * step))
        for k in range(count)
    ]


def reference_speaker(start_ms: int, end_ms: int, reference: Sequence[RefTurn]) -> str:
    """The reference speaker of ``[start_ms, end_ms)``: most overlap, else nearest."""
    overlaps = [min(end_ms, t.end_ms) - max(start_ms, t.start_ms) for t in reference]
    best = int(np.argmax(overlaps))
    if overlaps[best] > 0:
        return reference[best].speaker
    middle = (start_ms + end_ms) / 2
    return min(reference, key=lambda t: max(t.start_ms - middle, middle - t.end_ms, 0)).speaker


def attribution(finals: Sequence[SegmentData], reference: Sequence[RefTurn]) -> Attribution:
    """Score the ``speaker`` labels of ``finals`` against ``reference`` (not empty)."""
    if not reference:
        raise ValueError("attribution needs at least one reference turn")
    pairs: list[list[tuple[str, str]]] = []  # per final: (label, reference speaker) per word
    for segment in finals:
        label = segment.speaker or NO_LABEL
        spans = _word_spans(segment)
        pairs.append([(label, reference_speaker(a, b, reference)) for a, b in spans])
    labels = sorted({label for final in pairs for label, _ in final} - {NO_LABEL})
    truths = sorted({t.speaker for t in reference})
    counts = np.zeros((len(labels), len(truths)), np.int64)
    for final in pairs:
        for label, truth in final:
            if label != NO_LABEL:
                counts[labels.index(label), truths.index(truth)] += 1
    rows, cols = linear_sum_assignment(-counts) if labels else ([], [])
    mapped = {labels[r]: truths[c] for r, c in zip(rows, cols, strict=True)}
    words = sum(len(final) for final in pairs)
    right = sum(int(counts[r, c]) for r, c in zip(rows, cols, strict=True))
    wrong_finals = 0
    scored = [final for final in pairs if final]
    for final in scored:
        said = [truth for _, truth in final]
        majority = max(set(said), key=said.count)
        wrong_finals += mapped.get(final[0][0]) != majority
    return Attribution(words, words - right, len(scored), wrong_finals, len(labels))
