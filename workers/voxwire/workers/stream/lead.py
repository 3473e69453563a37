"""A live final decoded after the stream audio that leads up to it.

A file's 30 s window holds the turns before each one, and Whisper reads a turn
better for them: on conversations of several voices with background noise,
finals decoded alone lost about 5 points of WER against the same audio as a
file (``benchmarks/bench_live_accuracy.py``). So the intake hands a final (and
a likely final) up to ``LiveTuning.lead_ms`` of the audio before it (its
``lead``, within the 30 s window: :func:`lead_ms_for`), the engine decodes lead
and segment together, and :func:`after_lead` keeps what was said after the
lead: the words whose middle lies in the segment, their times moved to the
segment's start. The decode needs word times for the cut; it asks for them,
and drops them again when the options did not.

Partials are decoded alone (they are many, and revised anyway), and so are the
finals of several sessions batched into one engine call (a batch gives no
word times).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.workers.engine import Engine, EngineOptions, Segment

WINDOW_MS = 30_000
"""Whisper's window: lead and segment are kept within one."""
_SAMPLES_PER_MS = SAMPLE_RATE // 1000


def lead_ms_for(lead_ms: int, segment_ms: int) -> int:
    """How much lead a segment of ``segment_ms`` gets: at most ``lead_ms``, and
    no more than leaves lead and segment in one window."""
    return max(0, min(lead_ms, WINDOW_MS - segment_ms))


def transcribe_after(
    engine: Engine,
    lead: Audio,
    audio: Audio,
    options: EngineOptions,
    abort: Callable[[], bool] | None = None,
) -> list[Segment]:
    """``audio`` transcribed after ``lead`` (the audio right before it): the
    segments of what was said in ``audio``, times relative to its start. With
    no lead, ``audio`` alone."""
    if not lead.size:
        return engine.transcribe(audio, options, abort=abort)
    joined = np.concatenate([lead, audio])
    heard = engine.transcribe(joined, replace(options, word_timestamps=True), abort=abort)
    cut_ms = lead.size // _SAMPLES_PER_MS
    end_ms = audio.size // _SAMPLES_PER_MS
    return after_lead(heard, cut_ms, end_ms, words=options.word_timestamps)


def after_lead(
    segments: list[Segment], cut_ms: int, end_ms: int, *, words: bool = True
) -> list[Segment]:
    """What ``segments`` (decoded from a lead of ``cut_ms`` and a segment of
    ``end_ms``) hold of the segment: the words whose middle lies at or after
    ``cut_ms``, as segments with times from the cut (within ``[0, end_ms]``)
    and text made of those words; a segment without words is kept whole when
    its middle lies after the cut. ``words`` False: the segments carry none."""
    kept: list[Segment] = []
    for segment in segments:
        if segment.words:
            inside = [w for w in segment.words if w.start_ms + w.end_ms >= 2 * cut_ms]
            if not inside:
                continue
            shifted = tuple(
                replace(w, start_ms=_moved(w.start_ms, cut_ms, end_ms),
                        end_ms=_moved(w.end_ms, cut_ms, end_ms))
                for w in inside
            )  # fmt: skip
            text = " ".join(w.word for w in shifted)
            start, end = shifted[0].start_ms, shifted[-1].end_ms
        elif segment.start_ms + segment.end_ms >= 2 * cut_ms:
            shifted, text = (), segment.text
            start = _moved(segment.start_ms, cut_ms, end_ms)
            end = _moved(segment.end_ms, cut_ms, end_ms)
        else:
            continue
        kept.append(
            replace(segment, start_ms=start, end_ms=max(start, end), text=text,
                    words=shifted if words else ())
        )  # fmt: skip
    return kept


def _moved(ms: int, cut_ms: int, end_ms: int) -> int:
    return min(max(ms - cut_ms, 0), end_ms)
