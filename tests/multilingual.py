"""Non-English speech for tests and benchmarks: sentences spoken by espeak-ng.

espeak-ng (Debian package ``espeak-ng``, installed by ``scripts/services.sh
speech``) is a formant synthesiser: robotic, but its words are exact, so a
multilingual model must recognise the language and most of the words.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import jiwer
from whisper_normalizer.basic import BasicTextNormalizer

_normalizer = BasicTextNormalizer()


@dataclass(frozen=True)
class Sentence:
    language: str
    voice: str
    text: str


SENTENCES = [
    Sentence(
        "de",
        "de",
        "Wir treffen uns morgen um zehn Uhr am Bahnhof und fahren dann gemeinsam nach München.",
    ),
    Sentence(
        "fr",
        "fr-fr",
        "Bonjour. Je voudrais réserver une table pour quatre personnes ce soir au restaurant.",
    ),
    Sentence(
        "es",
        "es",
        "Buenos días. Quiero reservar una mesa para cuatro personas esta noche en el restaurante.",
    ),
]


def have_espeak() -> bool:
    return shutil.which("espeak-ng") is not None


def speak(sentence: Sentence, folder: Path) -> Path:
    """A WAV file (22.05 kHz) of ``sentence``, at a calm 140 words a minute."""
    wav = folder / f"espeak-{sentence.language}.wav"
    subprocess.run(
        ["espeak-ng", "-v", sentence.voice, "-s", "140", "-w", str(wav), sentence.text],
        check=True,
        capture_output=True,
    )
    return wav


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate after Whisper's language-neutral normalisation."""
    return float(jiwer.wer(_normalizer(reference), _normalizer(hypothesis) or "<empty>"))
