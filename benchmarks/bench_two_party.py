"""Diarization error rate of two-party mono calls, at 16 and 8 kHz.

A call centre's recordings are mostly mono: two voices, turn after turn. This
measures the file path's diarization (:func:`voxwire.workers.files.job.speaker_turns`,
what an upload with ``diarize`` runs) on:

- the real two-speaker recording of ``../shared/eval`` with an RTTM reference
  (``pyannote_sample``);
- calls of two synthetic voices (espeak-ng ``en-us`` and ``en-us+f3``, a man's
  and a woman's; and ``en-us`` with ``en-us+f4``, the e2e tests' pair), the
  lines of :data:`LINES`, when espeak-ng is installed;
- calls made here: alternating turns of two clearly different voices of the
  eval set (:data:`VOICES`: a man reading LibriVox, the woman of LJ Speech;
  the man of the MFA corpus, the woman of LibriSpeech speaker 1995), 0.4 s
  between turns, the reference known from how the call was built.

Each at 16 kHz and through a telephone line (8 kHz, G.711 mu-law, back to
16 kHz: :mod:`voxwire.audio.g711`), with no speaker bounds (what a new user
sends) and with ``min_speakers = max_speakers = 2``. DER is pyannote.metrics'
with a 250 ms collar, overlap scored (there is none in the made calls).
``--thresholds`` adds columns for other clustering thresholds.

``--path upload`` measures instead what a user gets (:mod:`bench_two_party_upload`):
each call uploaded as a file (16 kHz PCM WAV and 8 kHz mu-law WAV) to an embedded
platform with ``diarize`` on and no bounds, the finals' ``speaker`` labels scored
(:mod:`evaluation.speaker_attribution`), next to the component's DER on the
samples the upload decodes.

    .venv/bin/python benchmarks/bench_two_party.py [--thresholds 0.5,0.7] [--path upload]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyannote.core import Annotation, Segment
from pyannote.metrics.diarization import DiarizationErrorRate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_diarization import annotation, load_rttm

from evaluation.corpus import EVAL_DIR, eval_items
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.resample import resample
from voxwire.workers.speakers.encoder import shared_encoder
from voxwire.workers.speakers.files import Turn
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize

COLLAR_S = 0.25
GAP_S = 0.4
VOICES = {
    "librivox-man+lj-woman": (
        ["pocketsphinx_librivox_0870", "pocketsphinx_librivox_0890", "pocketsphinx_librivox_0920",
         "pocketsphinx_librivox_0880", "pocketsphinx_librivox_0930"],
        ["lhotse_lj_LJ002-0020", "lhotse_lj_LJ002-0035"],
    ),
    "mfa-man+ls1995-woman": (
        ["mfa_acoustic_corpus", "mfa_cold_corpus"],
        ["wenet_ls_1995-1837-0001"],
    ),
}  # fmt: skip
LINES = [
    "Hello, thank you for calling, how can I help you today?",
    "Hi, my parcel has not arrived yet.",
    "I am sorry to hear that. Can I have your order number please?",
    "Yes, it is four five six seven eight.",
    "Thank you. I can see it left the depot on Monday.",
    "Monday? It should have been here by now.",
    "You are right. I will send a new one today.",
    "Great, thank you very much.",
]
SYNTHETIC = ("en-us", "en-us+f3")
TEST_VOICES = ("en-us", "en-us+f4")
"""The voices of the e2e tests' calls (``tests/workers/speech.py``)."""
TURN_S = 4.0
"""The longest turn cut from a recording."""


@dataclass(frozen=True)
class Call:
    name: str
    audio: Audio
    reference: Annotation


def _pieces(ids: list[str]) -> list[Audio]:
    """The recordings ``ids`` cut into turns of at most :data:`TURN_S`."""
    items = {item.id: item for item in eval_items()}
    out: list[Audio] = []
    step = int(TURN_S * SAMPLE_RATE)
    for name in ids:
        samples = decode(items[name].path.read_bytes()).samples
        out += [samples[i : i + step] for i in range(0, len(samples), step)]
    return [p for p in out if len(p) > SAMPLE_RATE // 2]


def made_call(name: str, turns: int = 12) -> Call:
    """Turns of the two voices of ``VOICES[name]``, one after the other."""
    first, second = (_pieces(ids) for ids in VOICES[name])
    parts: list[Audio] = []
    reference = Annotation()
    at = 0.0
    for k in range(turns):
        voice, pool = ("A", first) if k % 2 == 0 else ("B", second)
        piece = pool[(k // 2) % len(pool)]
        reference[Segment(at, at + len(piece) / SAMPLE_RATE)] = voice
        parts += [piece, np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
        at += len(piece) / SAMPLE_RATE + GAP_S
    return Call(name, np.concatenate(parts).astype(np.float32), reference)


def synthetic_call(
    voices: tuple[str, str] = SYNTHETIC, name: str = "espeak-man+woman"
) -> Call | None:
    """:data:`LINES` said in turn by the two espeak-ng ``voices`` (default
    :data:`SYNTHETIC`); None without espeak-ng."""
    if shutil.which("espeak-ng") is None:
        return None
    parts: list[Audio] = []
    reference = Annotation()
    at = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for k, line in enumerate(LINES):
            wav = Path(folder) / f"{k}.wav"
            voice = voices[k % 2]
            subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), line], check=True)
            piece = decode(wav.read_bytes()).samples
            reference[Segment(at, at + len(piece) / SAMPLE_RATE)] = voice
            parts += [piece, np.zeros(int(GAP_S * SAMPLE_RATE), np.float32)]
            at += len(piece) / SAMPLE_RATE + GAP_S
    return Call(name, np.concatenate(parts).astype(np.float32), reference)


def real_calls() -> list[Call]:
    audio = decode((EVAL_DIR / "audio" / "pyannote_sample.wav").read_bytes()).samples
    return [Call("pyannote_sample", audio, load_rttm(EVAL_DIR / "rttm" / "pyannote_sample.rttm"))]


def telephone(audio: Audio) -> Audio:
    """``audio`` (16 kHz) as a G.711 mu-law 8 kHz line delivers it, at 16 kHz."""
    narrow = np.clip(resample(audio, SAMPLE_RATE, 8000), -1, 1).astype(np.float32)
    coded = g711_to_float32(float32_to_g711(narrow, Law.MULAW), Law.MULAW)
    return resample(coded, 8000, SAMPLE_RATE).astype(np.float32)


def der(call: Call, turns: list[Turn]) -> float:
    metric = DiarizationErrorRate(collar=COLLAR_S)
    return float(
        metric(call.reference, annotation(turns), uem=call.reference.get_timeline().extent())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thresholds", default="", help="comma-separated clustering thresholds")
    parser.add_argument(
        "--path", choices=("component", "upload"), default="component",
        help="upload: through an embedded platform, as a user uploads the call",
    )  # fmt: skip
    args = parser.parse_args()
    calls = real_calls() + [made_call(name) for name in VOICES]
    for voices, name in ((SYNTHETIC, "espeak-man+woman"), (TEST_VOICES, "espeak-us+f4")):
        synthetic = synthetic_call(voices, name)
        calls += [synthetic] if synthetic else []
    if args.path == "upload":
        from bench_two_party_upload import run_uploads

        run_uploads(calls)
        return
    encoder = shared_encoder()
    variants = [("now", DiarizationOptions())] + [
        (f"threshold {t}", DiarizationOptions(threshold=float(t)))
        for t in args.thresholds.split(",")
        if t
    ]
    print(f"{'call':<24} {'band':<6} {'bounds':<7} " + " ".join(f"{v:>14}" for v, _ in variants))
    totals: dict[str, list[float]] = {v: [] for v, _ in variants}
    for call in calls:
        for band, audio in (("16k", call.audio), ("8k-ul", telephone(call.audio))):
            for bounds in (None, 2):
                row = []
                for label, options in variants:
                    options = DiarizationOptions(
                        min_speakers=bounds, max_speakers=bounds, threshold=options.threshold
                    )
                    turns = diarize(audio, encoder, options)
                    value = der(call, turns)
                    totals[label].append(value)
                    row.append(f"{value:>7.1%} ({len({t.speaker for t in turns})} spk)")
                print(
                    f"{call.name:<24} {band:<6} {bounds or '-'!s:<7} " + " ".join(row),
                    flush=True,
                )
    print("mean DER: " + ", ".join(f"{v} {np.mean(x):.1%}" for v, x in totals.items()))


if __name__ == "__main__":
    main()
