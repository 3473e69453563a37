"""Short encoder windows for short clips, on faster-whisper.

Whisper encodes 30 s of audio however short the clip, so a live final of 3 s
costs what 30 s do; with tiny.en on a CPU the encoder is most of a decode (1.1
of 1.4 core-seconds per clip here). CTranslate2's encoder takes fewer frames
at a cost that falls with them (600 frames: about 15 times less), but
faster-whisper pads every window to 3000 frames before it encodes.
:class:`WindowedModel` (made by :func:`windowed_model`, since faster-whisper is
imported on first use) cuts that padding down to ``frames`` while they are set.

Whisper learnt on 30 s windows: on one barely longer than the clip it loops
(a phrase repeated up to the token limit) or drops words. So the window holds
the clip and :data:`MARGIN_S` more, and is at least the ``window_s`` asked for
(:func:`window_frames`); a decode that looped (:func:`looped`) is done again on
the whole window. ``benchmarks/bench_streams.py`` measures what it saves and
costs on live streams (the ``live_window_s`` setting).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

from voxwire.audio.samples import SAMPLE_RATE

WINDOW_S = 30
"""Whisper's window."""
MARGIN_S = 4
"""Audio-less seconds after the clip, at least, on a short window."""
FRAMES_PER_S = 100
"""Mel frames per second of audio (a 10 ms hop)."""
LOOP_RATIO = 2.4
"""A text that compresses more than this (zlib) repeats itself: faster-whisper's threshold."""
LOOP_TOKENS_PER_S = 12
"""More tokens than this per second of audio is not speech being written down."""


def window_frames(samples: int, window_s: int) -> int | None:
    """The encoder frames for a clip of ``samples`` asked to use a window of
    ``window_s`` (0: Whisper's): None when that is the whole window anyway."""
    if window_s <= 0:
        return None
    seconds = max(window_s, math.ceil(samples / SAMPLE_RATE) + MARGIN_S)
    return seconds * FRAMES_PER_S if seconds < WINDOW_S else None


def looped(pieces: Sequence[Any], samples: int) -> bool:
    """Whether faster-whisper's segments of a clip of ``samples`` look like a loop."""
    tokens = sum(len(piece.tokens) for piece in pieces)
    ratio = max((float(piece.compression_ratio) for piece in pieces), default=0.0)
    return ratio > LOOP_RATIO or tokens > LOOP_TOKENS_PER_S * samples / SAMPLE_RATE + 8


@cache
def windowed_model() -> type[Any]:
    """faster-whisper's ``WhisperModel`` that encodes only ``frames`` when they are set."""
    import numpy as np
    from faster_whisper import WhisperModel  # type: ignore[import-untyped]

    class WindowedModel(WhisperModel):  # type: ignore[misc]
        frames: int | None = None

        def encode(self, features: Any) -> Any:
            if self.frames is not None and features.shape[-1] > self.frames:
                features = np.ascontiguousarray(features[..., : self.frames])
            return super().encode(features)

    return WindowedModel
