"""How a live stream's chunks hold its audio: an :class:`AudioEncoding` at a
sample rate, mono.

============  ==========================  ==========================================
encoding      sample rates (Hz)           each chunk
============  ==========================  ==========================================
``pcm16``     8000, **16000**, 48000      PCM16LE samples (2 bytes each)
``opus``      8000-**48000** (Opus's)     one Opus packet (RFC 6716) of ``frame_ms``
``mulaw``     **8000**, 16000             G.711 mu-law samples (1 byte each)
``alaw``      **8000**, 16000             G.711 A-law samples (1 byte each)
============  ==========================  ==========================================

The rate in bold is the one a stream that names none has. The platform
resamples everything else to the 16 kHz its engines take, band-limited. An
Opus packet carries its own bandwidth, so for ``opus`` the rate only says what
the encoder ran at; the packets decode the same whatever it is.
"""

from __future__ import annotations

from enum import StrEnum


class AudioEncoding(StrEnum):
    """How a live stream's chunks hold its audio: ``pcm16``, PCM16LE (256 kbit/s
    at 16 kHz); ``opus``, one Opus packet per chunk (RFC 6716, mono, e.g.
    16-24 kbit/s for links that cannot carry PCM); ``mulaw`` and ``alaw``,
    G.711 as telephone networks carry it (64 kbit/s at 8 kHz)."""

    PCM16 = "pcm16"
    OPUS = "opus"
    MULAW = "mulaw"
    ALAW = "alaw"


AudioCodec = AudioEncoding
"""The name :class:`AudioEncoding` had before G.711 came (``codec`` in requests)."""

OPUS_FRAME_MS = (10, 20, 40, 60, 80, 100, 120)
"""The Opus packet durations a stream may declare."""

SAMPLE_RATES: dict[AudioEncoding, tuple[int, ...]] = {
    AudioEncoding.PCM16: (8_000, 16_000, 48_000),
    AudioEncoding.OPUS: (8_000, 12_000, 16_000, 24_000, 48_000),
    AudioEncoding.MULAW: (8_000, 16_000),
    AudioEncoding.ALAW: (8_000, 16_000),
}
"""The sample rates a stream in each encoding may declare."""

NATIVE_RATES: dict[AudioEncoding, int] = {
    AudioEncoding.PCM16: 16_000,
    AudioEncoding.OPUS: 48_000,
    AudioEncoding.MULAW: 8_000,
    AudioEncoding.ALAW: 8_000,
}
"""The sample rate of a stream that declares none."""

SAMPLE_BYTES: dict[AudioEncoding, int] = {
    AudioEncoding.PCM16: 2,
    AudioEncoding.MULAW: 1,
    AudioEncoding.ALAW: 1,
}
"""Bytes per sample of the encodings that are sample streams (not Opus)."""

CHUNK_MS = (10, 1_000)
"""The shortest and longest ``frame_ms`` of a PCM or G.711 stream."""


def check_format(encoding: AudioEncoding, sample_rate: int, frame_ms: int) -> None:
    """Raise ``ValueError``, saying what would do, unless a stream may send
    ``encoding`` at ``sample_rate`` in frames of ``frame_ms``."""
    rates = SAMPLE_RATES[encoding]
    if sample_rate not in rates:
        raise ValueError(
            f"sample_rate {sample_rate} is not one a {encoding.value} stream may have: "
            f"use one of {', '.join(map(str, rates))} (or leave it out for "
            f"{NATIVE_RATES[encoding]})"
        )
    if encoding is AudioEncoding.OPUS:
        if frame_ms not in OPUS_FRAME_MS:
            raise ValueError(f"frame_ms must be one of {OPUS_FRAME_MS}, not {frame_ms}")
        return
    low, high = CHUNK_MS
    if not low <= frame_ms <= high:
        raise ValueError(
            f"frame_ms {frame_ms} is not a {encoding.value} chunk length: use {low} to {high} ms"
        )


def chunk_bytes(encoding: AudioEncoding, sample_rate: int, chunk_ms: int) -> int:
    """The size of a ``chunk_ms`` chunk of a PCM or G.711 stream (e.g. 160 bytes
    for 20 ms of mu-law at 8 kHz); ``ValueError`` for Opus, whose packets vary."""
    if encoding not in SAMPLE_BYTES:
        raise ValueError(f"{encoding.value} chunks have no fixed size")
    return SAMPLE_BYTES[encoding] * sample_rate * chunk_ms // 1000
