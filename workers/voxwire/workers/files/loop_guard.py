"""A file's looping decode caught and decoded again.

Files decode greedily at temperature 0 with no fallback, and on telephone
audio (8 kHz, G.711, noise, a phrase said again and again) the decoder can go
into a loop: one phrase written until the token limit. :class:`LoopGuard`
wraps an engine for the file path and gives it the defence of Whisper's
reference decoding, with the rule of :mod:`voxwire.workers.loops`:

1. segments are held back (not handed on) while they are within one Whisper
   window (:data:`WINDOW_MS`) of the newest; each new one is checked with those
   held before it: the joined text of the held segments from some segment on
   loops (compression ratio, a repeated run) -> the decode stops there;
2. the window from the start of the first looping segment is decoded again at
   each temperature of :data:`FALLBACK` in turn (the last without the
   session's prompt, which can feed a loop), until a decode does not loop;
   when all do, the one with the best mean word log-probability is kept, with
   its repeated runs cut to one phrase (:func:`~voxwire.workers.loops.cut_repeats`):
   the repeated tail is never published. The engine's own fallback (whisper.cpp's
   temperature ladder) is off during a redecode: stacked on this one it nearly
   doubled whisper.cpp's time on the looping call and raised its WER above no
   guard at all;
3. its segments are handed on (but the last one when the window ended inside
   it), and the decode goes on at temperature 0 from the end of the last one.

A file that never loops costs nothing more than the checks. At most
:data:`MAX_REDECODES` windows of a file are decoded again.
``benchmarks/bench_loops.py`` measures the WER with and without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.metrics import FILE_LOOPS_REDECODED
from voxwire.workers.engine import Engine, EngineOptions, Segment, SegmentCallback
from voxwire.workers.loops import confidence, cut_repeats, loops, said_again, words_of

log = logging.getLogger(__name__)

WINDOW_MS = 30_000
"""Whisper's window: what a redecode reads, and how long segments are held."""
FALLBACK = (0.2, 0.5, 0.8)
"""Temperatures a looping window is decoded at, in turn."""
DROP_PROMPT_AT = 0.8
"""From this temperature on, the window is decoded without the session's prompt."""
MAX_REDECODES = 10
_PER_MS = SAMPLE_RATE // 1000


class _Looped(Exception):
    def __init__(self, start_ms: int) -> None:
        super().__init__(start_ms)
        self.start_ms = start_ms


def looping_from(segments: list[Segment]) -> int | None:
    """The index of the first of ``segments`` that is part of a loop: their
    joined text loops from it on, and it loops itself or is said again after
    it; None when there is none."""
    for first, segment in enumerate(segments):
        later = " ".join(s.text for s in segments[first + 1 :])
        if loops(f"{segment.text} {later}") and (
            loops(segment.text) or said_again(segment.text, later)
        ):
            return first
    return None


@dataclass
class _Held:
    """Segments of a decode not yet handed on, times from the start of the file."""

    offset_ms: int
    hand_on: SegmentCallback
    segments: list[Segment] = field(default_factory=list)

    def take(self, segment: Segment) -> None:
        self.segments.append(segment.moved(self.offset_ms))
        first = looping_from(self.segments)
        if first is not None:
            start = self.segments[first].start_ms
            self.release(len(self.segments[:first]))
            raise _Looped(start)
        newest = self.segments[-1].start_ms
        while self.segments and self.segments[0].end_ms < newest - WINDOW_MS:
            self.release(1)

    def release(self, count: int) -> None:
        for segment in self.segments[:count]:
            self.hand_on(segment)
        del self.segments[:count]


class LoopGuard:
    """``engine`` for files, with looping windows decoded again (module doc);
    ``engine_fallback``: the engine's own temperature ladder runs during a
    redecode too (:attr:`EngineOptions.engine_fallback`; off by default)."""

    def __init__(self, engine: Engine, *, engine_fallback: bool = False) -> None:
        self.engine = engine
        self.name = engine.name
        self.engine_fallback = engine_fallback

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        out: list[Segment] = []

        def hand_on(segment: Segment) -> None:
            out.append(segment)
            if on_segment is not None:
                on_segment(segment)

        offset_ms, redecodes = 0, 0
        duration_ms = audio.size // _PER_MS
        while offset_ms < duration_ms:
            held = _Held(offset_ms, hand_on)
            take = held.take if redecodes < MAX_REDECODES else hand_on_moved(hand_on, offset_ms)
            try:
                self.engine.transcribe(audio[offset_ms * _PER_MS :], options, take, abort)
            except _Looped as loop:
                redecodes += 1
                FILE_LOOPS_REDECODED.inc()
                log.info(
                    "the decode looped at %.1f s: decoding that window again", loop.start_ms / 1000
                )
                kept, offset_ms = self._redecode(audio, loop.start_ms, options, abort)
                for segment in _without_repeats(kept, out[-1] if out else None):
                    hand_on(segment)
                continue
            held.release(len(held.segments))
            break
        return out

    def close(self) -> None:
        """The engine is the caller's: it is not closed here."""

    def _redecode(
        self, audio: Audio, start_ms: int, options: EngineOptions, abort: Callable[[], bool] | None
    ) -> tuple[list[Segment], int]:
        """The segments of the window at ``start_ms`` decoded again (module doc),
        and where the decode goes on from."""
        window = audio[start_ms * _PER_MS : (start_ms + WINDOW_MS) * _PER_MS]
        end_ms = start_ms + window.size // _PER_MS
        tries: list[list[Segment]] = []
        for temperature in FALLBACK:
            prompt = options.initial_prompt if temperature < DROP_PROMPT_AT else None
            vocabulary = options.vocabulary if temperature < DROP_PROMPT_AT else ()
            again = replace(
                options,
                temperature=temperature,
                initial_prompt=prompt,
                vocabulary=vocabulary,
                engine_fallback=self.engine_fallback,
            )
            decoded = [
                s.moved(start_ms) for s in self.engine.transcribe(window, again, None, abort)
            ]
            if not loops(" ".join(s.text for s in decoded)):
                return _kept(decoded, end_ms, audio.size // _PER_MS)
            tries.append(decoded)
        best = max(tries, key=lambda t: confidence([w.probability for s in t for w in s.words]))
        cut = [_cut(s) for s in best]
        return _kept(_without_repeats(cut), end_ms, audio.size // _PER_MS)


def _kept(segments: list[Segment], end_ms: int, duration_ms: int) -> tuple[list[Segment], int]:
    """``segments`` of a window ending at ``end_ms`` that are kept (the last
    one not when the window ended inside it, the file going on), and where
    the decode goes on from: the end of the last kept, else the window's end."""
    if end_ms < duration_ms and len(segments) > 1 and segments[-1].end_ms >= end_ms - 1000:
        segments = segments[:-1]
    go_on = max((s.end_ms for s in segments), default=end_ms)
    if go_on <= (segments[0].start_ms if segments else end_ms - 1):
        go_on = end_ms
    return segments, go_on


def _cut(segment: Segment) -> Segment:
    """``segment`` with its repeated runs cut to one phrase, in its text and words."""
    tokens = segment.text.split()
    kept = cut_repeats(tokens)
    if len(kept) == len(tokens):
        return segment
    words = [segment.words[i] for i in cut_repeats([w.word for w in segment.words])]
    return replace(segment, text=" ".join(tokens[i] for i in kept), words=tuple(words))


def _without_repeats(segments: list[Segment], before: Segment | None = None) -> list[Segment]:
    """``segments`` without one that says what the one before it said (the
    first compared with ``before``)."""
    kept: list[Segment] = []
    last = before
    for segment in segments:
        if last is None or words_of(segment.text) != words_of(last.text):
            kept.append(segment)
        last = segment
    return kept


def hand_on_moved(hand_on: SegmentCallback, offset_ms: int) -> SegmentCallback:
    """``hand_on`` of each segment with its times moved on by ``offset_ms``."""
    return lambda segment: hand_on(segment.moved(offset_ms))
