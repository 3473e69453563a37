"""Who spoke when in a file, two at once where they overlap.

1. The file is cut into 10 s windows every :attr:`DiarizationOptions.step_s` (the
   last one ends at the end of the file) and :class:`~.segmentation.Segmenter`
   says, for each 17 ms frame of each window, which of up to three local
   speakers talk (two at most at once);
2. each local speaker of each window gets an embedding (:mod:`.encoder`: the
   encoder reads the whole file once, and the voice's embedding pools its rows)
   of the frames where it talks alone (all its frames when that is under
   :data:`MIN_ALONE_MS`); one heard for less than :data:`MIN_EMBED_MS` gets
   none, and its frames are left out;
3. the embeddings are clustered (:mod:`.clustering`: the count of speakers is
   found, or kept within bounds; a file where a window heard two voices has two
   at least), then in each window its local speakers go to
   the nearest speakers of the file, two local speakers never to one
   (Hungarian assignment);
4. every frame of the file hears as many speakers as the windows over it say on
   average (rounded), the ones most active there over those windows.

Runs of one speaker are turns (:func:`diarize`); a gap under
:data:`~.files.JOIN_GAP_MS` between two turns of one speaker is part of the
turn. Turns of two speakers may overlap. Speakers are named ``S1``, ``S2``... in
the order they are first heard.

On the eval recordings with RTTM files this took the DER from 46.2 % (Silero VAD
and windows of the speech embedded by an older encoder, GE2E, one speaker at a
time) to 27.3 % (``benchmarks/bench_diarization.py``; docs/benchmarks.md, Speakers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.workers.engine import TranscriptionAborted
from voxwire.workers.speakers.clustering import DISTANCE_THRESHOLD, cluster
from voxwire.workers.speakers.encoder import (
    EMBEDDING_SIZE,
    FrameFeatures,
    FrameReader,
    SpeakerEncoder,
    unit,
)
from voxwire.workers.speakers.files import JOIN_GAP_MS, Turn, speaker_label
from voxwire.workers.speakers.segmentation import (
    FRAME_CENTRE,
    FRAME_STEP,
    FRAMES,
    WINDOW_SAMPLES,
    Segmenter,
)

MIN_ALONE_MS = 1000
MIN_EMBED_MS = 500
BATCH = 16
"""Windows through the segmentation network at once."""


@dataclass(frozen=True, slots=True)
class DiarizationOptions:
    min_speakers: int | None = None
    max_speakers: int | None = None
    threshold: float = DISTANCE_THRESHOLD
    """Cosine distance under which local speakers are one voice (:mod:`.clustering`)."""
    step_s: float = 1.0
    """Between the starts of two 10 s windows."""


@cache
def shared_segmenter() -> Segmenter:
    """One segmentation network per process, loaded (and installed) on first use."""
    return Segmenter.load()


def diarize(
    audio: Audio,
    encoder: SpeakerEncoder,
    options: DiarizationOptions = DiarizationOptions(),
    segmenter: Segmenter | None = None,
    abort: Callable[[], bool] | None = None,
) -> list[Turn]:
    """The speaker turns of ``audio`` (16 kHz), in order of their starts.
    :class:`~voxwire.workers.engine.TranscriptionAborted` when ``abort`` says so
    (polled every 10 s of audio read by the encoder and every batch of windows)."""
    stop = abort or (lambda: False)
    reader = FrameReader(encoder, audio, stop)
    active = speaker_frames(audio, reader, encoder, segmenter or shared_segmenter(), options, stop)
    first_heard = [np.flatnonzero(active[:, s])[0] for s in range(active.shape[1])]
    order = np.argsort(first_heard, kind="stable")
    labels = [""] * active.shape[1]
    for number, column in enumerate(order):
        labels[column] = speaker_label(number)
    return frame_turns(active, labels)


def frame_turns(active: npt.NDArray[np.bool_], labels: list[str], offset_ms: int = 0) -> list[Turn]:
    """The turns of ``active`` (frames, speakers), column ``s`` named ``labels[s]``,
    ``offset_ms`` added, in order of their starts."""
    turns: list[Turn] = []
    for column, label in enumerate(labels):
        joined: list[tuple[int, int]] = []
        for a, b in _runs(active[:, column]):
            start = offset_ms + _frame_start(a) * 1000 // SAMPLE_RATE
            end = offset_ms + _frame_start(b) * 1000 // SAMPLE_RATE
            if joined and start - joined[-1][1] < JOIN_GAP_MS:
                joined[-1] = (joined[-1][0], end)
            else:
                joined.append((start, end))
        turns.extend(Turn(start, end, label) for start, end in joined)
    return sorted(turns, key=lambda t: (t.start_ms, t.speaker))


def voice_embeddings(
    active: npt.NDArray[np.bool_], features: FrameFeatures, encoder: SpeakerEncoder
) -> list[npt.NDArray[np.float32] | None]:
    """One embedding per speaker (column) of ``active`` (:func:`speaker_frames`,
    from the start of the audio of ``features``), None for one heard too little
    to tell."""
    own = [_own_frames(active, k) for k in range(active.shape[1])]
    heard = [_spans(frames, 0) for frames in own if frames is not None]
    vectors = iter(encoder.embed_spans(features, heard))
    return [None if frames is None else next(vectors) for frames in own]


def _frame_start(frame: int) -> int:
    """The sample where frame ``frame`` of a window (or of the file) starts."""
    return FRAME_CENTRE - FRAME_STEP // 2 + FRAME_STEP * frame


def _runs(mask: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of true frames in ``mask``."""
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(np.int8), 0]))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def window_starts(samples: int, step: int) -> list[int]:
    if samples <= WINDOW_SAMPLES:
        return [0]
    starts = list(range(0, samples - WINDOW_SAMPLES + 1, step))
    if starts[-1] != samples - WINDOW_SAMPLES:
        starts.append(samples - WINDOW_SAMPLES)
    return starts


def _local_activity(
    audio: Audio, starts: list[int], segmenter: Segmenter, abort: Callable[[], bool]
) -> npt.NDArray[np.bool_]:
    """(windows, FRAMES, 3)."""
    out = []
    for first in range(0, len(starts), BATCH):
        if abort():
            raise TranscriptionAborted("diarization stopped: the worker is stopping")
        batch = np.zeros((len(starts[first : first + BATCH]), WINDOW_SAMPLES), np.float32)
        for row, start in enumerate(starts[first : first + BATCH]):
            piece = audio[start : start + WINDOW_SAMPLES]
            batch[row, : len(piece)] = piece
        out.append(segmenter.activity(batch))
    return np.concatenate(out)


def _spans(frames: npt.NDArray[np.bool_], start: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` sample spans of the runs of ``frames`` (the frames of a
    window at sample ``start``)."""
    return [(start + _frame_start(a), start + _frame_start(b)) for a, b in _runs(frames)]


def _own_frames(activity: npt.NDArray[np.bool_], k: int) -> npt.NDArray[np.bool_] | None:
    """The frames of ``activity`` (frames, speakers) to embed speaker ``k`` from:
    where it talks alone, or all its frames when that is under
    :data:`MIN_ALONE_MS`; None under :data:`MIN_EMBED_MS`."""
    per_ms = 1000 * FRAME_STEP / SAMPLE_RATE
    talks = activity[:, k]
    frames = talks & (activity.sum(axis=1) == 1)
    if frames.sum() * per_ms < MIN_ALONE_MS:
        frames = talks
    return frames if frames.sum() * per_ms >= MIN_EMBED_MS else None


def _embeddings(
    reader: FrameReader,
    starts: list[int],
    activity: npt.NDArray[np.bool_],
    encoder: SpeakerEncoder,
) -> tuple[npt.NDArray[np.float32], list[tuple[int, int]]]:
    """One embedding per local speaker heard long enough, and whose it is (window, speaker)."""
    found: list[npt.NDArray[np.float32]] = []
    owners: list[tuple[int, int]] = []
    for c, start in enumerate(starts):
        heard = [(k, _own_frames(activity[c], k)) for k in range(activity.shape[2])]
        voices = [(k, frames) for k, frames in heard if frames is not None]
        if not voices:
            continue
        features = reader.covering(start, start + WINDOW_SAMPLES)
        vectors = encoder.embed_spans(features, [_spans(frames, start) for _, frames in voices])
        for (k, _), vector in zip(voices, vectors, strict=True):
            if np.linalg.norm(vector) > 0:
                found.append(vector)
                owners.append((c, k))
    if not found:
        return np.zeros((0, EMBEDDING_SIZE), np.float32), []
    return np.stack(found), owners


def _assign(
    embeddings: npt.NDArray[np.float32],
    owners: list[tuple[int, int]],
    labels: npt.NDArray[np.int64],
    windows: int,
) -> npt.NDArray[np.int64]:
    """(windows, 3): the file's speaker of each local speaker (-1: none)."""
    speakers = int(labels.max()) + 1
    centres = unit(np.stack([embeddings[labels == s].mean(axis=0) for s in range(speakers)]))
    mapping = np.full((windows, 3), -1, dtype=np.int64)
    by_window: dict[int, list[int]] = {}
    for row, (c, _) in enumerate(owners):
        by_window.setdefault(c, []).append(row)
    for c, rows in by_window.items():
        similarity = embeddings[rows] @ centres.T
        picked, to = linear_sum_assignment(-similarity)
        for r, s in zip(picked, to, strict=True):
            mapping[c, owners[rows[r]][1]] = s
    return mapping


def speaker_frames(
    audio: Audio,
    reader: FrameReader,
    encoder: SpeakerEncoder,
    segmenter: Segmenter,
    options: DiarizationOptions,
    abort: Callable[[], bool] = lambda: False,
) -> npt.NDArray[np.bool_]:
    """(frames, speakers): which speaker talks in each frame of ``audio`` (16 kHz);
    frame ``g`` is centred on sample ``FRAME_CENTRE + FRAME_STEP * g``. Speakers
    heard nowhere have no column."""
    starts = window_starts(len(audio), round(options.step_s * SAMPLE_RATE))
    activity = _local_activity(audio, starts, segmenter, abort)
    total = max(1, (len(audio) - FRAME_CENTRE) // FRAME_STEP + 1)
    embeddings, owners = _embeddings(reader, starts, activity, encoder)
    if not owners:
        return np.zeros((total, 0), dtype=np.bool_)
    together = max(np.bincount([c for c, _ in owners]))
    low = max(options.min_speakers or 1, int(together))
    if options.max_speakers is not None:
        low = min(low, options.max_speakers)
    labels = cluster(
        embeddings,
        threshold=options.threshold,
        min_speakers=low,
        max_speakers=options.max_speakers,
    )
    mapping = _assign(embeddings, owners, labels, len(starts))
    speakers = int(labels.max()) + 1
    score = np.zeros((total + FRAMES, speakers), np.float32)
    count = np.zeros(total + FRAMES, np.float32)
    covered = np.zeros(total + FRAMES, np.float32)
    for c, start in enumerate(starts):
        offset = round(start / FRAME_STEP)
        span = slice(offset, offset + FRAMES)
        count[span] += activity[c].sum(axis=1)
        covered[span] += 1
        for k in range(3):
            if mapping[c, k] >= 0:
                score[span, mapping[c, k]] += activity[c, :, k]
    score, count, covered = score[:total], count[:total], covered[:total]
    heard = np.rint(count / np.maximum(covered, 1)).astype(np.int64)
    ranked = np.argsort(-score, axis=1)
    active = np.zeros((total, speakers), dtype=np.bool_)
    for n in range(min(2, speakers)):
        rows = np.flatnonzero((heard > n) & (score[np.arange(total), ranked[:, n]] > 0))
        active[rows, ranked[rows, n]] = True
    return active[:, active.any(axis=0)]
