"""When a decode has gone into a loop: the rule, without an engine.

Whisper decoding greedily at temperature 0 can fall into a loop: one phrase
written again and again ("in 1813 in 1813 in 1813 ...") until the token limit,
or one sentence repeated segment after segment. Whisper's reference decoding
catches it with the gzip compression ratio of the window's text (a text that
repeats itself compresses well) and decodes the window again at a higher
temperature. This module holds that rule as pure functions of text, so the
file path (:mod:`voxwire.workers.files.loop_guard`) and tests share it:

- :func:`compression_ratio`: bytes of the text over bytes of its zlib
  compression; above :data:`LOOP_RATIO` the text loops (Whisper's and
  faster-whisper's threshold);
- :func:`repeated_run`: a phrase of up to :data:`MAX_PHRASE_WORDS` words said
  :data:`MIN_REPEATS` times or more in a row, covering at least
  :data:`MIN_RUN_WORDS` words (short texts compress badly, so the ratio alone
  misses a short loop; "no, no, no" is speech and stays under both bounds);
- :func:`loops`: either of the two; :func:`said_again` tells where a loop
  of several segments starts;
- :func:`confidence`: the mean log-probability of the words, Whisper's second
  measure, used to choose between decodes that all loop;
- :func:`cut_repeats`: a text with every repeated run cut to its first
  phrase, the last resort when no decode is free of the loop: the repeated
  tail is never published.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

LOOP_RATIO = 2.4
"""A text whose zlib compression ratio is above this repeats itself."""
MAX_PHRASE_WORDS = 8
"""The longest phrase :func:`repeated_run` looks for."""
MIN_REPEATS = 3
"""A phrase said this many times in a row, at least, may be a loop..."""
MIN_RUN_WORDS = 8
"""... when the run covers at least this many words."""
_WORD = re.compile(r"[\w']+")
_SENTENCE_END = re.compile(r"[.?!;]")


def compression_ratio(text: str) -> float:
    """Bytes of ``text`` (UTF-8) over bytes of its zlib compression; 0 for no text."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def words_of(text: str) -> list[str]:
    """The words of ``text``, lower-case, without punctuation."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True, slots=True)
class Run:
    """A phrase of ``size`` words said ``times`` times in a row from word ``start``."""

    start: int
    size: int
    times: int

    @property
    def words(self) -> int:
        return self.size * self.times


def repeated_run(words: Sequence[str]) -> Run | None:
    """The longest run (in words) of a phrase repeated in a row that is a loop
    (see the module doc), the earliest of equal ones; None when there is none."""
    best: Run | None = None
    n = len(words)
    for size in range(1, MAX_PHRASE_WORDS + 1):
        start = 0
        while start + size * MIN_REPEATS <= n:
            phrase = words[start : start + size]
            times = 1
            while words[start + times * size : start + (times + 1) * size] == phrase:
                times += 1
            run = Run(start, size, times)
            if times >= MIN_REPEATS and run.words >= MIN_RUN_WORDS:
                if best is None or run.words > best.words:
                    best = run
                start += size * times
            else:
                start += 1
    return best


def loops(text: str) -> bool:
    """Whether ``text`` (a decode's text, or several segments' joined) loops."""
    return compression_ratio(text) > LOOP_RATIO or repeated_run(words_of(text)) is not None


def said_again(text: str, later: str) -> bool:
    """Whether a sentence of ``text`` (two words or more) is said again in
    ``later``: ``text`` is where a loop of ``later`` starts."""
    after = f" {' '.join(words_of(later))} "
    for sentence in _SENTENCE_END.split(text):
        words = words_of(sentence)
        if len(words) >= 2 and f" {' '.join(words)} " in after:
            return True
    return False


def confidence(probabilities: Sequence[float]) -> float:
    """The mean log-probability of words with these probabilities; -inf for none."""
    if not probabilities:
        return -math.inf
    return sum(math.log(max(p, 1e-6)) for p in probabilities) / len(probabilities)


def cut_repeats(tokens: Sequence[str]) -> list[int]:
    """The indices of ``tokens`` (a text's words as written, or a segment's
    words) that are left when each repeated run (:func:`repeated_run`) is cut
    to its first phrase; all of them when nothing repeats."""
    kept = list(range(len(tokens)))
    while True:
        run = repeated_run([_bare(tokens[i]) for i in kept])
        if run is None:
            return kept
        del kept[run.start + run.size : run.start + run.words]


def _bare(token: str) -> str:
    return " ".join(words_of(token))
