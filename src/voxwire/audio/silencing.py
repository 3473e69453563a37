"""Stretches of 16 kHz mono PCM16LE made silent: the redacted spans of a
session's audio (:mod:`voxwire.sessions.audio`).

Pure code, no I/O. Word times are the engine's estimates (tens of
milliseconds off, more at a word's edges), so every span is widened by
:data:`REDACTION_PAD_MS` on each side before it is silenced, and spans that
then touch are merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from voxwire.audio.samples import SAMPLE_RATE

REDACTION_PAD_MS = 100
"""Silence added on each side of a redacted span: word times are approximate."""

_BYTES = 2  # per sample
_SAMPLES_PER_MS = SAMPLE_RATE // 1000

Span = tuple[int, int]
"""Milliseconds ``[start, end)`` of a session's audio."""


def padded(spans: Iterable[Span], pad_ms: int, duration_ms: int) -> tuple[Span, ...]:
    """``spans`` widened by ``pad_ms`` on each side, kept within
    ``[0, duration_ms]``, sorted, those that overlap or touch merged; empty
    spans dropped."""
    if pad_ms < 0:
        raise ValueError(f"pad_ms must not be negative, not {pad_ms}")
    out: list[Span] = []
    for start, end in sorted(spans):
        start, end = max(0, start - pad_ms), min(duration_ms, end + pad_ms)
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


def duration_ms(pcm: bytes) -> int:
    """How long 16 kHz mono PCM16LE ``pcm`` lasts, in whole milliseconds."""
    return len(pcm) // (_BYTES * _SAMPLES_PER_MS)


def silence(pcm: bytes, spans: Sequence[Span]) -> bytes:
    """``pcm`` (16 kHz mono PCM16LE) with the samples of ``spans`` (ms, as
    :func:`padded` gives them) set to zero; the rest and the length unchanged."""
    out = bytearray(pcm)
    for start, end in spans:
        first = min(len(out), start * _SAMPLES_PER_MS * _BYTES)
        last = min(len(out), end * _SAMPLES_PER_MS * _BYTES)
        out[first:last] = bytes(last - first)
    return bytes(out)
