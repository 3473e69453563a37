"""The engine interface: audio samples in, timed segments out.

An engine is loaded once per worker and reused for every job. Implementations
live in :mod:`voxwire.workers.engines` and are chosen by name in the config.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import numpy as np

from voxwire.audio.samples import Audio
from voxwire.core.errors import EngineError


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How to transcribe. Override with ``dataclasses.replace``."""

    language: str = "en"
    beam_size: int = 1
    threads: int = 2
    temperature: float = 0.0
    initial_prompt: str | None = None
    audio_ctx: int = 0
    """whisper.cpp: encoder frames to use (50 per second of audio, at most 1500);
    0 encodes the whole 30 s window. Smaller is faster on short clips."""
    word_timestamps: bool = True
    """Give each segment its words with their times and probabilities."""
    window_s: int = 0
    """faster-whisper: encode a short clip on a window of this many seconds (at
    least the clip and 4 s more) instead of Whisper's 30 s, which costs less
    (:mod:`voxwire.workers.engines.windowed`); 0: the whole 30 s. A clip
    decoded with a ``vocabulary`` always has the whole 30 s."""
    task: str = "transcribe"
    """``transcribe`` (the text in the language spoken) or ``translate`` (in
    English: Whisper's translate task; a multilingual model only). ``language``
    stays the language spoken: given, or detected as for a transcription."""
    vocabulary: tuple[str, ...] = ()
    """Words the session expects (names, product terms): they open the decoder's
    prompt (:attr:`prompt`), which makes the decoder write them as given."""
    engine_fallback: bool = True
    """whisper.cpp: let it decode a window again at higher temperatures (its
    ``temperature_inc`` ladder, on entropy and log-probability thresholds);
    False decodes at :attr:`temperature` only, as faster-whisper always does
    here. The file loop guard turns it off for its own redecodes."""

    @property
    def prompt(self) -> str | None:
        """What the decoder is prompted with: the vocabulary ("ComfyUI, Voxwire."),
        then ``initial_prompt``; None: nothing."""
        vocabulary = ", ".join(self.vocabulary) + "." if self.vocabulary else ""
        return " ".join(p for p in (vocabulary, self.initial_prompt or "") if p) or None


@dataclass(frozen=True, slots=True)
class Word:
    """A word of a segment: times relative to the audio start, inside its
    segment's; ``probability`` the engine's confidence (0 to 1)."""

    word: str
    start_ms: int
    end_ms: int
    probability: float


@dataclass(frozen=True, slots=True)
class Segment:
    """A committed piece of transcript, times relative to the audio start."""

    start_ms: int
    end_ms: int
    text: str
    no_speech_prob: float = 0.0
    language: str | None = None
    """The language it was decoded in (detected when asked for ``"auto"``)."""
    language_prob: float | None = None
    """How sure the detection was (0 to 1); None when the language was given."""
    words: tuple[Word, ...] = ()
    """The segment's words in order; empty when word times were not asked for."""

    def moved(self, offset_ms: int) -> Segment:
        """This segment with its times, and its words', moved on by ``offset_ms``
        (a piece of audio decoded on its own, placed in the whole)."""
        if not offset_ms:
            return self
        words = tuple(
            replace(w, start_ms=w.start_ms + offset_ms, end_ms=w.end_ms + offset_ms)
            for w in self.words
        )
        return replace(
            self, start_ms=self.start_ms + offset_ms, end_ms=self.end_ms + offset_ms, words=words
        )


SegmentCallback = Callable[[Segment], None]

# Non-speech markers whisper writes: [BLANK_AUDIO], [ Silence ], (music), ♪ ...
_BRACKETED = re.compile(r"\[[^\]]*\]")
_MARKERS_ONLY = re.compile(r"^[\s♪♫*.…-]*(\([^)]*\)[\s♪♫*.…-]*)*$")


def clean_text(text: str) -> str:
    """Segment text without non-speech markers; empty if nothing spoken is left."""
    text = _BRACKETED.sub(" ", text)
    if _MARKERS_ONLY.match(text):
        return ""
    return " ".join(text.split())


def fit_words(words: Iterable[Word], start_ms: int, end_ms: int) -> tuple[Word, ...]:
    """``words`` as a segment ``[start_ms, end_ms]`` carries them: stripped, markers
    and empty words dropped, times clamped into the segment and never going back
    (an engine may stamp a word a little outside its segment, or before the
    end of the word before it)."""
    fitted: list[Word] = []
    floor = start_ms
    for word in words:
        text = word.word.strip()
        if not text or not clean_text(text):
            continue
        start = min(max(word.start_ms, floor), end_ms)
        end = min(max(word.end_ms, start), end_ms)
        probability = min(max(float(word.probability), 0.0), 1.0)
        fitted.append(Word(text, start, end, probability))
        floor = end
    return tuple(fitted)


def check_audio(audio: Audio) -> Audio:
    """``audio`` as contiguous float32 mono samples; EngineError for anything else."""
    if not np.issubdtype(np.asarray(audio).dtype, np.floating):
        raise EngineError(f"expected float samples in [-1, 1], got {np.asarray(audio).dtype}")
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise EngineError(f"expected mono samples (1-D), got shape {samples.shape}")
    if not np.isfinite(samples).all():
        raise EngineError("audio contains NaN or infinite samples")
    return samples


TASKS = ("transcribe", "translate")


def check_task(task: str, multilingual: bool, model: str) -> bool:
    """Whether ``task`` is translate; EngineError for an unknown task, or for a
    translation asked of an English-only ``model``."""
    if task not in TASKS:
        raise EngineError(f"unknown task {task!r}", hint="use 'transcribe' or 'translate'")
    if task == "translate" and not multilingual:
        raise EngineError(
            f"model {model} is English-only, cannot translate", hint="use a multilingual model"
        )
    return task == "translate"


class TranscriptionAborted(EngineError):
    """``abort`` asked the engine to stop; nothing was transcribed."""

    code = "aborted"


class Engine(Protocol):
    """A speech-to-text engine."""

    name: str

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        """Transcribe ``audio``; call ``on_segment`` for each segment as it is
        produced, then return all of them. Markers such as ``[BLANK_AUDIO]`` are
        never returned as text. ``abort`` is polled while the engine works: True
        stops it with :class:`TranscriptionAborted`. Raises
        :class:`voxwire.core.errors.EngineError`."""
        ...

    def close(self) -> None:
        """Release the model."""
        ...


@runtime_checkable
class LanguageDetector(Protocol):
    """An engine that can tell which language is spoken."""

    def detect_language(self, audio: Audio, options: EngineOptions) -> tuple[str, float]:
        """The most likely language of the first 30 s of ``audio`` and its probability.
        An English-only model answers ``("en", 1.0)``. Raises
        :class:`voxwire.core.errors.EngineError`."""
        ...


@runtime_checkable
class BatchEngine(Engine, Protocol):
    """An engine that can transcribe several short clips in one call."""

    def transcribe_batch(self, clips: list[Audio], options: EngineOptions) -> list[list[Segment]]:
        """Clips of up to 30 s each (endpointed utterances, from any sessions);
        for each, its segments. Raises :class:`voxwire.core.errors.EngineError`."""
        ...
