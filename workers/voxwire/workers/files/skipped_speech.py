"""Speech the decoder skipped in a file, decoded again.

Whisper decodes a file window by window, and a window whose decode ends with a
lone timestamp counts as done to its end. On noisy conversations it sometimes
ends one early: a 26 s recording of three voices at 20 dB came out as its first
two sentences, 59 of its 77 words lost (``benchmarks/bench_live_accuracy.py
--seed 37``, faster-whisper alone does the same), and the word alignment put
the few words it wrote at the end of the window.

So a file is transcribed knowing where its speech is (Silero VAD, the frames
the live path scores, run only on gaps long enough to matter): a segment whose
first word comes after more than :data:`SKIPPED_MS` of speech that no segment
held since the last one is not kept; the decode stops there and starts again on
the audio from the end of the last segment kept. Speech left after the last
segment is decoded again the same way. A restart begins after a segment that
the decode before it kept (the decoding is deterministic: the same audio would
be read the same way again), and there are at most :data:`RETRIES` a file, so
that speech the engine cannot read (a cough, a laugh the VAD takes for speech)
costs little.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.workers.engine import Engine, EngineOptions, Segment, SegmentCallback
from voxwire.workers.vad import FRAME_MS, FRAME_SAMPLES, SileroVad, Vad, speech_probabilities

log = logging.getLogger(__name__)

SKIPPED_MS = 1500
"""Speech between two segments (or after the last) that no segment holds, at
which the decoder counts as having skipped it."""
EDGE_MS = 250
"""Left out at each end of a stretch: word times and VAD frames are this loose."""
RETRIES = 3
_SAMPLES_PER_MS = SAMPLE_RATE // 1000


class SpeechMap:
    """Where speech is in a file, asked stretch by stretch: Silero VAD frames of
    :data:`FRAME_MS` at or above ``threshold``, scored only for the stretches
    long enough to hold a skip (most gaps between segments are not)."""

    def __init__(self, audio: Audio, vad: Vad | None = None, threshold: float = 0.5) -> None:
        self._audio = audio
        self._vad = vad
        self._threshold = threshold

    def speech_ms(self, start_ms: int, end_ms: int) -> int:
        """The ms of speech in ``[start_ms, end_ms)``, in whole frames."""
        stretch = self._audio[max(0, start_ms) * _SAMPLES_PER_MS : max(0, end_ms) * _SAMPLES_PER_MS]
        if stretch.size < FRAME_SAMPLES:
            return 0
        if self._vad is None:
            self._vad = SileroVad()
        self._vad.reset()
        scores = speech_probabilities(self._vad, stretch)
        return sum(score >= self._threshold for score in scores) * FRAME_MS

    def unheard_ms(self, start_ms: int, end_ms: int) -> int:
        """The speech between two segments (or a segment and the end), less the
        loose edges; a stretch shorter than :data:`SKIPPED_MS` is not scored
        (its length, the most it can hold, is returned)."""
        start_ms, end_ms = start_ms + EDGE_MS, end_ms - EDGE_MS
        if end_ms - start_ms < SKIPPED_MS:
            return max(0, end_ms - start_ms)
        return self.speech_ms(start_ms, end_ms)


class _Skipped(Exception):
    """Raised from the segment callback: speech before this segment was skipped."""


def transcribe_heard(
    engine: Engine,
    audio: Audio,
    options: EngineOptions,
    on_segment: SegmentCallback,
    abort: Callable[[], bool] | None = None,
    speech: SpeechMap | None = None,
) -> None:
    """``engine.transcribe(audio, ...)``, with what it skipped decoded again (see
    the module doc); ``on_segment`` sees every segment kept, times from the
    start of ``audio``, in order."""
    speech = speech or SpeechMap(audio)
    duration_ms = audio.size // _SAMPLES_PER_MS
    kept_end = 0
    offset = 0
    retries = 0

    def check(segment: Segment) -> None:
        nonlocal kept_end
        moved = segment.moved(offset)
        start = moved.words[0].start_ms if moved.words else moved.start_ms
        if (
            retries < RETRIES
            and kept_end > offset
            and speech.unheard_ms(kept_end, start) >= SKIPPED_MS
        ):
            raise _Skipped
        on_segment(moved)
        kept_end = max(kept_end, moved.end_ms)

    while True:
        try:
            engine.transcribe(audio[offset * _SAMPLES_PER_MS :], options, check, abort)
        except _Skipped:
            pass
        else:
            if (
                retries >= RETRIES
                or kept_end <= offset
                or speech.unheard_ms(kept_end, duration_ms) < SKIPPED_MS
            ):
                return
        retries += 1
        log.info(
            "the decoder skipped speech after %.1f s: decoding again from there (%d of %d)",
            kept_end / 1000, retries, RETRIES,
        )  # fmt: skip
        offset = kept_end
