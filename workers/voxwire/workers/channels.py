"""Separate channels: a call recorded (or streamed) with one party per channel
is transcribed track by track, and the tracks' finals are put back together.
Pure: no engine, no bus.

- :func:`deinterleave` splits a stream chunk of interleaved samples into one
  chunk per channel (a stereo stream's frames, PCM16 or G.711);
- :func:`speech_only` keeps a track's speech (Silero VAD probabilities, padded
  and with short gaps bridged) and silences the rest, so that the engine does
  not decode a party's long silences nor the faint leak of the other party
  below the VAD's threshold, and :func:`turns` groups that speech into the
  stretches the engine decodes one by one (a party's turns: Whisper, given a
  window that opens with speech and long silence after it, often stops after
  the first turn and never reads the next);
- :func:`drop_echoes` removes what one channel only heard of another (see the
  rule below);
- :func:`in_time_order` merges the tracks' finals by start time (channel order
  breaking ties), as the session publishes them.

The echo rule. A telephone line returns some of the far party's voice (line
or acoustic echo), and a headset picks up the other speaker (crosstalk): the
track of the quiet party then holds an attenuated copy of the other party's
words, which Whisper writes out as if said there. A final ``a`` is dropped as
an echo when a final ``b`` of another channel overlaps it in time, at least
:data:`ECHO_WORDS` of ``a``'s words (normalised: case and punctuation aside)
are among ``b``'s, and ``a``'s channel is at least :data:`ECHO_DB` quieter than
``b``'s over ``a``'s time span. Two parties saying the same words at the same
time at similar levels are both kept; so are words that repeat the other
party's after a pause (read back a number), since they do not overlap it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire_client.messages import WordData

ECHO_WORDS = 0.5
"""The share of a final's words found in an overlapping final of another
channel from which it may be an echo."""
ECHO_DB = 10.0
"""How much quieter (RMS, dB) a final's channel must be than the other's, over
the final's span, for it to count as an echo."""
SPEECH_PAD_MS = 300
"""Kept around each stretch of speech of a track."""
BRIDGE_MS = 600
"""Gaps between speech shorter than this are kept as they are."""
_PER_MS = SAMPLE_RATE // 1000
_WORD = re.compile(r"[\w']+")


def deinterleave(data: bytes, channels: int, sample_bytes: int) -> list[bytes]:
    """``data`` (frames of ``channels`` interleaved samples of ``sample_bytes``
    each) as one byte string per channel; ValueError for a chunk that does not
    hold whole frames."""
    frame = channels * sample_bytes
    if len(data) % frame:
        raise ValueError(
            f"a chunk of {len(data)} bytes does not hold whole frames of {channels} "
            f"interleaved {sample_bytes}-byte samples ({frame} bytes each)"
        )
    if channels == 1:
        return [bytes(data)]
    grid = np.frombuffer(data, dtype=np.uint8).reshape(-1, channels, sample_bytes)
    return [grid[:, n, :].tobytes() for n in range(channels)]


def speech_only(
    track: Audio,
    probabilities: Sequence[float],
    frame_ms: int,
    threshold: float = 0.5,
) -> Audio:
    """``track`` with everything but its speech silenced: frames of ``frame_ms``
    scored at or above ``threshold``, widened by :data:`SPEECH_PAD_MS`, gaps
    under :data:`BRIDGE_MS` bridged."""
    keep = np.zeros(track.size, dtype=bool)
    for start_ms, end_ms in speech_spans(probabilities, frame_ms, threshold):
        keep[start_ms * _PER_MS : end_ms * _PER_MS] = True
    out = track.copy()
    out[~keep] = 0.0
    return out


def speech_spans(
    probabilities: Sequence[float], frame_ms: int, threshold: float = 0.5
) -> list[tuple[int, int]]:
    """The ms spans of speech (see :func:`speech_only`), padded and bridged."""
    spans: list[tuple[int, int]] = []
    for n, p in enumerate(probabilities):
        if p < threshold:
            continue
        start, end = max(0, n * frame_ms - SPEECH_PAD_MS), (n + 1) * frame_ms + SPEECH_PAD_MS
        if spans and start - spans[-1][1] < BRIDGE_MS:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


TURN_GAP_MS = 2000
"""Silence in a track at which a new stretch for the engine starts."""
MAX_STRETCH_MS = 25_000
"""The longest stretch the engine is given at once (under Whisper's 30 s window)."""


def turns(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` of speech (ms, in order) grouped into stretches for the engine:
    a new one after :data:`TURN_GAP_MS` of silence, or where it would grow past
    :data:`MAX_STRETCH_MS` (a longer span is one stretch; the engine windows it)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start - out[-1][1] < TURN_GAP_MS and end - out[-1][0] <= MAX_STRETCH_MS:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


@dataclass(frozen=True, slots=True)
class TrackFinal:
    """A final of one channel's track: channel 1, 2...; times in ms."""

    channel: int
    start_ms: int
    end_ms: int
    text: str
    words: tuple[WordData, ...] = ()


def level_db(track: Audio, start_ms: int, end_ms: int) -> float:
    """RMS level of ``track`` over ``[start_ms, end_ms)`` in dB (full scale 0;
    silence -120)."""
    part = track[max(0, start_ms) * _PER_MS : max(0, end_ms) * _PER_MS]
    if part.size == 0:
        return -120.0
    rms = float(np.sqrt(np.mean(np.square(part, dtype=np.float64))))
    return 20 * math.log10(max(rms, 1e-6))


def words(text: str) -> list[str]:
    """``text``'s words, lower case, without punctuation."""
    return _WORD.findall(text.lower())


def shared_words(text: str, other: str) -> float:
    """The share of ``text``'s words that ``other`` holds too (0 for no words)."""
    mine, theirs = words(text), set(words(other))
    return sum(w in theirs for w in mine) / len(mine) if mine else 0.0


def sounds_like(final: TrackFinal, other: TrackFinal) -> bool:
    """The rule's words and time: ``other``, of another channel, overlaps
    ``final`` and holds at least :data:`ECHO_WORDS` of its words (the levels
    decide the rest; a live stream's come from its intakes)."""
    if final.channel == other.channel:
        return False
    if final.start_ms >= other.end_ms or other.start_ms >= final.end_ms:
        return False
    return shared_words(final.text, other.text) >= ECHO_WORDS


def is_echo(final: TrackFinal, other: TrackFinal, tracks: Sequence[Audio]) -> bool:
    """Whether ``final`` is an echo of ``other`` (the module's rule)."""
    if not sounds_like(final, other):
        return False
    mine = level_db(tracks[final.channel - 1], final.start_ms, final.end_ms)
    theirs = level_db(tracks[other.channel - 1], final.start_ms, final.end_ms)
    return theirs - mine >= ECHO_DB


def drop_echoes(finals: Sequence[TrackFinal], tracks: Sequence[Audio]) -> list[TrackFinal]:
    """``finals`` without those that are an echo of another channel's final."""
    return [f for f in finals if not any(is_echo(f, o, tracks) for o in finals if o is not f)]


def in_time_order(finals: Iterable[TrackFinal]) -> list[TrackFinal]:
    """The finals of all tracks by start (then end, then channel)."""
    return sorted(finals, key=lambda f: (f.start_ms, f.end_ms, f.channel))
