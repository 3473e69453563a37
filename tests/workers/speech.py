"""Two voices taking turns, spoken by espeak-ng: speech whose speakers are known."""

from __future__ import annotations

import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode

VOICES = ("en-us", "en-us+f4")
"""A man's and a woman's voice (CAM++ similarity about 0.4 between them)."""
LINES = (
    "Good morning everyone, thank you for joining the weekly planning call today.",
    "Thanks for having me. I have three updates about the new warehouse project.",
    "Great, please start with the budget, since the board asked about it yesterday.",
    "The budget is on track. We spent forty percent and we are half way through.",
    "That is good news. What about the delivery dates for the heavy equipment?",
    "The cranes arrive next Tuesday and the conveyor belts a week after that.",
)


@dataclass(frozen=True, slots=True)
class Turn:
    voice: int
    start_ms: int
    end_ms: int


def say(text: str, voice: str, folder: Path) -> Audio:
    wav = folder / f"say-{abs(hash((text, voice)))}.wav"
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", "150", "-w", str(wav), text],
        check=True,
        capture_output=True,
    )
    return decode(wav.read_bytes()).samples


def conversation(
    voices: list[int], folder: Path, *, gap_s: float = 0.8, pauses: dict[int, float] | None = None
) -> tuple[Audio, list[Turn]]:
    """Line ``i`` said by ``VOICES[voices[i]]``, ``gap_s`` of silence between lines
    (``pauses[i]`` seconds before line ``i`` instead)."""
    parts: list[Audio] = []
    turns: list[Turn] = []
    at = 0
    for i, voice in enumerate(voices):
        gap = (pauses or {}).get(i, gap_s if i else 0.3)
        parts.append(np.zeros(int(gap * SAMPLE_RATE), np.float32))
        at += int(gap * SAMPLE_RATE)
        line = say(LINES[i % len(LINES)], VOICES[voice], folder)
        parts.append(line)
        turns.append(Turn(voice, at * 1000 // SAMPLE_RATE, (at + len(line)) * 1000 // SAMPLE_RATE))
        at += len(line)
    parts.append(np.zeros(SAMPLE_RATE, np.float32))
    return np.concatenate(parts), turns


def wav_file(audio: Audio, path: Path) -> Path:
    """``audio`` written as a 16 kHz mono PCM16 WAV file at ``path``."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path
