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
import numpy as np
from whisper_normalizer.basic import BasicTextNormalizer
from whisper_normalizer.english import EnglishTextNormalizer

from voxwire.audio.decoding import SAMPLE_RATE, Audio

_normalizer = BasicTextNormalizer()
_english = EnglishTextNormalizer()


@dataclass(frozen=True)
class Sentence:
    language: str
    voice: str
    text: str
    english: str = ""
    """What it says, in English: the reference of a translation."""


SENTENCES = [
    Sentence(
        "de",
        "de",
        "Wir treffen uns morgen um zehn Uhr am Bahnhof und fahren dann gemeinsam nach München.",
        "We will meet tomorrow at ten o'clock at the train station and then travel together to "
        "Munich.",
    ),
    Sentence(
        "fr",
        "fr-fr",
        "Bonjour. Je voudrais réserver une table pour quatre personnes ce soir au restaurant.",
        "Hello. I would like to book a table for four people tonight at the restaurant.",
    ),
    Sentence(
        "es",
        "es",
        "Buenos días. Quiero reservar una mesa para cuatro personas esta noche en el restaurante.",
        "Good morning. I want to book a table for four people tonight at the restaurant.",
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


def english_wer(reference: str, hypothesis: str) -> float:
    """Word error rate of an English text after Whisper's English normalisation
    (numbers as digits, British spellings and contractions unified)."""
    return float(jiwer.wer(_english(reference), _english(hypothesis) or "<empty>"))


_COMMON = "i you he she it we they the a an and or but to of in on at for with this that is are"
_MORE = "was will would want like be have good morning hello together people table tonight"
ENGLISH_WORDS = frozenset(f"{_COMMON} {_MORE}".split())
"""Common English words: a translation holds some, German, French or Spanish hardly any."""


def english_share(text: str) -> float:
    """The share of ``text``'s words that are :data:`ENGLISH_WORDS`."""
    words = _english(text).split()
    return sum(w in ENGLISH_WORDS for w in words) / len(words) if words else 0.0


def silence(seconds: float) -> Audio:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)
