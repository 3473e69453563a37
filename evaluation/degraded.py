"""Telephone audio at its worst, made from the eval recordings.

:func:`degrade` takes speech to what a bad call delivers: band-limited to
8 kHz, driven into clipping (a gain, then the limits), white noise at a
signal-to-noise ratio measured on the whole call, G.711 mu-law, and back to
16 kHz for the engine. :func:`looping_call` is the call that made both
engines loop at temperature 0 (tiny.en, the file path): four eval recordings,
4 s of silence between them (noise only, once degraded), 3 dB SNR, clipped
hard; faster-whisper wrote "There's nothing going on for the orange" seven
times, whisper.cpp "... for the garden" seven times
(``benchmarks/bench_loops.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.corpus import eval_items
from voxwire.audio.decoding import Audio, decode
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.resample import resample

RATE = 16_000
PHONE_RATE = 8_000


@dataclass(frozen=True)
class Call:
    audio: Audio
    """16 kHz float32 mono."""
    reference: str


def degrade(samples: Audio, snr_db: float, gain: float, seed: int) -> Audio:
    """``samples`` (16 kHz) through a bad telephone line (module doc), at 16 kHz."""
    rng = np.random.default_rng(seed)
    narrow = np.clip(resample(samples, RATE, PHONE_RATE) * gain, -1, 1)
    power = np.mean(narrow**2) + 1e-9
    noise = rng.normal(0, np.sqrt(power / 10 ** (snr_db / 10)), narrow.size).astype(np.float32)
    noisy = np.clip(narrow + noise, -1, 1).astype(np.float32)
    coded = g711_to_float32(float32_to_g711(noisy, Law.MULAW), Law.MULAW)
    return resample(coded, PHONE_RATE, RATE).astype(np.float32)


def joined(ids: list[str], gap_s: float) -> Call:
    """The eval recordings ``ids`` one after the other, ``gap_s`` of silence after each."""
    items = {item.id: item for item in eval_items()}
    parts: list[Audio] = []
    for name in ids:
        parts += [
            decode(items[name].path.read_bytes()).samples,
            np.zeros(int(gap_s * RATE), np.float32),
        ]
    text = " ".join(str(items[name].text) for name in ids)
    return Call(np.concatenate(parts).astype(np.float32), text)


LOOPING_IDS = [
    "mfa_acoustic_corpus",
    "mfa_commonvoice_en_22058264",
    "pocketsphinx_librivox_0880",
    "mfa_cold_corpus",
]


def looping_call() -> Call:
    """The degraded call both engines looped on (module doc)."""
    clean = joined(LOOPING_IDS, 4.0)
    return Call(degrade(clean.audio, snr_db=3, gain=30, seed=110), clean.reference)
