"""Speaker turns, and the speaker of each transcript segment.

A file's turns come from :func:`.segmented.diarize`, a live final's from
:mod:`.live`. :func:`split_segment` then gives a transcript segment its
speaker, the one who talks most during it, or splits it where the speaker
changes inside it: each side of a change must hold at least
:data:`MIN_SPLIT_MS` of that speaker's speech. Segments carry no word times
yet, so the text is cut at the share of the words that the times give, moved to
the nearest punctuation within :data:`SNAP_WORDS` words.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

JOIN_GAP_MS = 300
MIN_SPLIT_MS = 1000
SNAP_WORDS = 3


def speaker_label(number: int) -> str:
    """``S1`` for speaker 0, ``S2`` for 1..."""
    return f"S{number + 1}"


@dataclass(frozen=True, slots=True)
class Turn:
    """One speaker talking, times in ms from the start of the audio."""

    start_ms: int
    end_ms: int
    speaker: str


@dataclass(frozen=True, slots=True)
class Piece:
    """A part of a segment said by one speaker."""

    start_ms: int
    end_ms: int
    text: str
    speaker: str | None

    @property
    def span(self) -> tuple[int, int, str]:
        """``(start_ms, end_ms, text)``."""
        return self.start_ms, self.end_ms, self.text


def one_at_a_time(turns: list[Turn]) -> list[Turn]:
    """``turns`` without overlap: where two speakers talk at once, the one who was
    talking first keeps the time."""
    kept: list[Turn] = []
    for turn in sorted(turns, key=lambda t: (t.start_ms, t.end_ms)):
        start = max(turn.start_ms, kept[-1].end_ms) if kept else turn.start_ms
        if turn.end_ms > start:
            kept.append(Turn(start, turn.end_ms, turn.speaker))
    return kept


def _runs(start_ms: int, end_ms: int, turns: list[Turn]) -> list[tuple[int, int, str]]:
    """The speakers' stretches inside ``[start_ms, end_ms)``; a short one joins its neighbour."""
    runs: list[tuple[int, int, str]] = []
    for turn in turns:
        lo, hi = max(start_ms, turn.start_ms), min(end_ms, turn.end_ms)
        if hi <= lo:
            continue
        if runs and runs[-1][2] == turn.speaker:
            runs[-1] = (runs[-1][0], hi, turn.speaker)
        else:
            runs.append((lo, hi, turn.speaker))
    while len(runs) > 1:
        shortest = min(range(len(runs)), key=lambda i: runs[i][1] - runs[i][0])
        if runs[shortest][1] - runs[shortest][0] >= MIN_SPLIT_MS:
            break
        lo, hi, _ = runs.pop(shortest)
        if shortest > 0:  # the earlier neighbour takes it, else the next one
            prev = runs[shortest - 1]
            runs[shortest - 1] = (prev[0], max(prev[1], hi), prev[2])
        else:
            nxt = runs[0]
            runs[0] = (min(lo, nxt[0]), nxt[1], nxt[2])
        merged: list[tuple[int, int, str]] = []
        for run in runs:
            if merged and merged[-1][2] == run[2]:
                merged[-1] = (merged[-1][0], run[1], run[2])
            else:
                merged.append(run)
        runs = merged
    return runs


def _nearest_speaker(start_ms: int, end_ms: int, turns: list[Turn]) -> str | None:
    if not turns:
        return None
    middle = (start_ms + end_ms) / 2
    nearest = min(turns, key=lambda t: min(abs(t.start_ms - middle), abs(t.end_ms - middle)))
    return nearest.speaker


_PUNCT = re.compile(r"[.,;:!?…]$")


def _cut(words: list[str], share: float) -> int:
    """Where to cut ``words`` (an index) near ``share`` of them, at punctuation if close."""
    at = min(len(words) - 1, max(1, round(share * len(words))))
    near = [i for i in range(max(1, at - SNAP_WORDS), min(len(words), at + SNAP_WORDS + 1))]
    marked = [i for i in near if _PUNCT.search(words[i - 1])]
    return min(marked, key=lambda i: abs(i - at)) if marked else at


def split_segment(start_ms: int, end_ms: int, text: str, turns: list[Turn]) -> list[Piece]:
    """``text`` from ``start_ms`` to ``end_ms`` as pieces of one speaker each
    (``turns`` may overlap: :func:`one_at_a_time`)."""
    turns = one_at_a_time(turns)
    runs = _runs(start_ms, end_ms, turns)
    words = text.split()
    if len(runs) <= 1 or len(words) < 2 * len(runs):
        if runs:
            totals: dict[str, int] = {}
            for lo, hi, who in runs:
                totals[who] = totals.get(who, 0) + hi - lo
            speaker: str | None = max(totals, key=lambda k: totals[k])
        else:
            speaker = _nearest_speaker(start_ms, end_ms, turns)
        return [Piece(start_ms, end_ms, text, speaker)]
    pieces: list[Piece] = []
    bounds = [start_ms] + [(a[1] + b[0]) // 2 for a, b in itertools.pairwise(runs)]
    bounds.append(end_ms)
    taken = 0
    for n, run in enumerate(runs):
        if n == len(runs) - 1:
            cut = len(words)
        else:
            share = (bounds[n + 1] - start_ms) / max(1, end_ms - start_ms)
            cut = max(taken + 1, _cut(words, share))
        pieces.append(Piece(bounds[n], bounds[n + 1], " ".join(words[taken:cut]), run[2]))
        taken = cut
    return [p for p in pieces if p.text]
