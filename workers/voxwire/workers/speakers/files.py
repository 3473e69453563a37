"""Who spoke when in a file, and the speaker of each transcript segment.

:func:`diarize` finds a file's speaker turns before it is transcribed:

1. Silero VAD marks the speech (32 ms frames, probability >= 0.5);
2. the speech is laid end to end (pauses cut out, so that no window is half
   silence) and cut into windows of 1.6 s every :attr:`DiarizationOptions.hop_ms`,
   which never reach across a pause of :data:`SPLIT_PAUSE_MS` or more: voices
   change at such pauses, and a window that hears two voices is neither's (windows
   across turns made a third speaker of two alternating espeak-ng voices). A
   stretch of speech shorter than a window gets one window centred on it;
3. each window gets its embedding (:mod:`.encoder`) and the windows are clustered
   (:mod:`.clustering`): the count of speakers is found, or kept within bounds;
4. each 10 ms of speech takes the speaker of the window of its stretch centred
   nearest to it;
   runs of one speaker are turns, and a pause shorter than
   :data:`JOIN_GAP_MS` between two turns of one speaker is part of the turn.

Speakers are named ``S1``, ``S2``... in the order they are first heard.

:func:`split_segment` then gives a transcript segment its speaker, the one who
talks most during it, or splits it where the speaker changes inside it: each
side of a change must hold at least :data:`MIN_SPLIT_MS` of that speaker's
speech. Segments carry no word times yet, so the text is cut at the share of
the words that the times give, moved to the nearest punctuation within
:data:`SNAP_WORDS` words.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxwire.core.samples import Audio
from voxwire.workers.speakers.clustering import DISTANCE_THRESHOLD, cluster
from voxwire.workers.speakers.encoder import PARTIAL_FRAMES, SpeakerEncoder
from voxwire.workers.speakers.features import (
    FRAMES_PER_SECOND,
    mel_spectrogram,
    normalize_volume,
)
from voxwire.workers.vad import FRAME_MS, SileroVad, Vad, speech_probabilities

FRAME_MS_MEL = 1000 // FRAMES_PER_SECOND
JOIN_GAP_MS = 300
SPLIT_PAUSE_MS = 1000
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
class DiarizationOptions:
    min_speakers: int | None = None
    max_speakers: int | None = None
    threshold: float = DISTANCE_THRESHOLD
    """Cosine distance under which windows are one voice (:mod:`.clustering`)."""
    hop_ms: int = 400
    """Between the starts of two windows (1.6 s long) of the speech."""
    speech_threshold: float = 0.5


def speech_frames(audio: Audio, vad: Vad, threshold: float) -> npt.NDArray[np.bool_]:
    """Whether each 10 ms mel frame of ``audio`` is speech."""
    vad.reset()
    probs = np.array(speech_probabilities(vad, audio) or [0.0])
    frames = 1 + len(audio) // (16_000 // FRAMES_PER_SECOND)
    index = np.minimum(np.arange(frames) * FRAME_MS_MEL // FRAME_MS, len(probs) - 1)
    mask: npt.NDArray[np.bool_] = probs[index] >= threshold
    return mask


def _window_starts(stretches: list[tuple[int, int]], hop: int) -> list[list[int]]:
    """Window starts per stretch: windows inside it every ``hop`` frames and one
    ending at its end; a stretch shorter than a window gets one centred on it."""
    total = stretches[-1][1]
    per_stretch = []
    for start, end in stretches:
        if end - start <= PARTIAL_FRAMES:
            centred = start + (end - start) // 2 - PARTIAL_FRAMES // 2
            per_stretch.append([max(0, min(centred, total - PARTIAL_FRAMES))])
            continue
        starts = list(range(start, end - PARTIAL_FRAMES + 1, hop))
        if starts[-1] != end - PARTIAL_FRAMES:
            starts.append(end - PARTIAL_FRAMES)
        per_stretch.append(starts)
    return per_stretch


def _window_labels(
    mel: npt.NDArray[np.float32],
    stretches: list[tuple[int, int]],
    encoder: SpeakerEncoder,
    options: DiarizationOptions,
) -> npt.NDArray[np.int64]:
    """A speaker number for each frame of ``mel`` (speech only, end to end): each
    frame takes the label of the window of its stretch centred nearest to it."""
    hop = max(1, options.hop_ms // FRAME_MS_MEL)
    per_stretch = _window_starts(stretches, hop)
    starts = [s for group in per_stretch for s in group]
    embeddings = encoder.embed_windows(mel, starts)
    labels = cluster(
        embeddings,
        threshold=options.threshold,
        min_speakers=options.min_speakers,
        max_speakers=options.max_speakers,
    )
    result = np.zeros(len(mel), dtype=np.int64)
    first = 0
    for (start, end), group in zip(stretches, per_stretch, strict=True):
        centres = np.array(group) + PARTIAL_FRAMES // 2
        frames = np.arange(start, end)
        nearest = np.abs(frames[:, None] - centres[None, :]).argmin(axis=1)
        result[start:end] = labels[first + nearest]
        first += len(group)
    return result


def turns_of(speakers: npt.NDArray[np.int64]) -> list[Turn]:
    """Turns from a speaker number per 10 ms frame (-1: no speech)."""
    turns: list[Turn] = []
    start = 0
    for i in range(1, len(speakers) + 1):
        if i < len(speakers) and speakers[i] == speakers[start]:
            continue
        if speakers[start] >= 0:
            turn = Turn(start * FRAME_MS_MEL, i * FRAME_MS_MEL, speaker_label(int(speakers[start])))
            last = turns[-1] if turns else None
            if last and last.speaker == turn.speaker and turn.start_ms - last.end_ms < JOIN_GAP_MS:
                turns[-1] = Turn(last.start_ms, turn.end_ms, turn.speaker)
            else:
                turns.append(turn)
        start = i
    return turns


def diarize(
    audio: Audio,
    encoder: SpeakerEncoder,
    options: DiarizationOptions = DiarizationOptions(),
    vad: Vad | None = None,
) -> list[Turn]:
    """The speaker turns of ``audio`` (16 kHz), in time order."""
    mask = speech_frames(audio, vad or SileroVad(), options.speech_threshold)
    speech = np.flatnonzero(mask)
    if len(speech) == 0:
        return []
    mel = mel_spectrogram(normalize_volume(audio))[: len(mask)]
    speakers = np.full(len(mask), -1, dtype=np.int64)
    speakers[speech] = _window_labels(mel[speech], _stretches(speech), encoder, options)
    return turns_of(speakers)


def _stretches(speech: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of the speech frames laid end to end that no
    pause of :data:`SPLIT_PAUSE_MS` or more interrupts."""
    cuts = np.flatnonzero(np.diff(speech) > SPLIT_PAUSE_MS // FRAME_MS_MEL) + 1
    bounds = [0, *cuts.tolist(), len(speech)]
    return list(itertools.pairwise(bounds))


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
    """``text`` from ``start_ms`` to ``end_ms`` as pieces of one speaker each."""
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
