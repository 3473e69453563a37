"""Prompt matching: find the phrases a user asked for in committed transcript segments.

Pure code, no I/O. A user uploads audio with prompts (phrases); every committed
segment is checked against every prompt::

    matcher = PromptMatcher([Prompt(id="p1", text="ask not")])
    for hit in matcher.match("seg-3", "And so, ask not what...", 2_000, 9_000):
        ...  # hit.score, hit.start_ms, hit.end_ms, hit.highlight

Normalisation (:func:`voxwire.text.normalization.normalize`) makes recogniser
output and user phrasing comparable ("twelve percent", "12%" and "12 percent"
are the same tokens); prompts and segments are matched as normalised tokens.

Scoring. A window of segment tokens equal to the prompt's tokens scores 1.0.
With ``Prompt.fuzzy`` (the default), windows of the prompt's length and one
token shorter or longer (a word split or merged by the recogniser) score
``rapidfuzz.fuzz.ratio`` of the space-joined tokens, and count when the score
reaches ``Prompt.threshold``: "ask knot" matches "ask not" (0.93), "Amercans"
matches "Americans". Numbers never match fuzzily: the window must hold the same
numbers as the prompt, so "1962" does not match "1961". Short prompts are
tolerant of suffixes ("cat" matches "cats": 0.86). Matches of one prompt never
overlap: the best-scoring window wins, then the next best that does not touch
it, so each occurrence is reported once.

Timing. A segment has only a start and an end time, so a match's times are
estimated by its character position: the matched span's offsets within the
segment's text (surrounding whitespace excluded) are mapped linearly onto
[start_ms, end_ms]. Speaking rate varies and pauses are invisible, so expect
errors of a few hundred milliseconds within long segments. A session's
standing prompts (:mod:`voxwire.text.standing_prompts`) take the times of the
matched words instead when the finals carry word times.

Highlighting. A match's ``highlight`` is the segment's text, HTML-escaped, with
the matched span wrapped in ``<em>...</em>``: it is safe to insert as HTML.

A match is the contract's :class:`~voxwire_client.messages.MatchData`: a worker
publishes it in a :class:`~voxwire_client.messages.MatchMessage` as it is.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from voxwire.text.normalization import Token, normalize
from voxwire_client.messages import MatchData

__all__ = [
    "CompiledPrompt",
    "Prompt",
    "PromptMatcher",
    "candidates",
    "select",
]


MAX_SLOP = 10
MAX_WITHIN = 50


@dataclass(frozen=True, slots=True)
class Prompt:
    """A phrase to look for. ``threshold`` is the least fuzzy score that counts."""

    id: str
    text: str
    fuzzy: bool = True
    threshold: float = 0.8
    slop: int = 0
    """Up to this many other words may come between the prompt's words, which
    stay in order ("ask not what" with slop 1 finds "ask them not what")."""
    within: int | None = None
    """When set: all the prompt's words, in any order, within this many words
    ("budget approved" within 6 finds "approved the new budget")."""
    speaker: str | None = None
    """When set: only what this speaker (a diarization label, S1, S2...) says
    (:mod:`voxwire.text.standing_prompts`)."""

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError(f"prompt {self.id!r} is empty")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(
                f"prompt {self.id!r}: threshold must be in (0, 1], got {self.threshold}"
            )
        if not 0 <= self.slop <= MAX_SLOP:
            raise ValueError(f"prompt {self.id!r}: slop must be 0-{MAX_SLOP}, got {self.slop}")
        if self.within is not None and not 1 <= self.within <= MAX_WITHIN:
            raise ValueError(
                f"prompt {self.id!r}: within must be 1-{MAX_WITHIN} words, got {self.within}"
            )


@dataclass(frozen=True, slots=True)
class CompiledPrompt:
    """A prompt with its normalised words, ready to match."""

    prompt: Prompt
    words: tuple[str, ...]
    joined: str
    numbers: tuple[str, ...]

    @classmethod
    def of(cls, prompt: Prompt) -> CompiledPrompt:
        words = tuple(t.text for t in normalize(prompt.text))
        if not words:
            raise ValueError(f"prompt {prompt.id!r} has no words: {prompt.text!r}")
        if prompt.within is not None and prompt.within < len(words):
            raise ValueError(
                f"prompt {prompt.id!r}: within {prompt.within} is fewer than its {len(words)} words"
            )
        return cls(prompt, words, " ".join(words), _numbers(words))


def _numbers(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(w for w in words if any(c.isdigit() for c in w)))


class PromptMatcher:
    """Checks segments against a fixed list of prompts. Stateless between calls."""

    def __init__(self, prompts: Sequence[Prompt]) -> None:
        seen: set[str] = set()
        self._prompts: list[CompiledPrompt] = []
        for prompt in prompts:
            if prompt.id in seen:
                raise ValueError(f"duplicate prompt id {prompt.id!r}")
            seen.add(prompt.id)
            self._prompts.append(CompiledPrompt.of(prompt))

    @property
    def prompts(self) -> list[Prompt]:
        return [c.prompt for c in self._prompts]

    def match(self, segment_id: str, text: str, start_ms: int, end_ms: int) -> list[MatchData]:
        """Every prompt heard in this segment, by prompt then position."""
        tokens = normalize(text)
        if not tokens:
            return []
        words = [t.text for t in tokens]
        matches: list[MatchData] = []
        for compiled in self._prompts:
            for score, i, j in select(candidates(compiled, words)):
                span = tokens[i:j]
                matches.append(
                    _make_match(compiled.prompt, score, span, segment_id, text, start_ms, end_ms)
                )
        return matches


Candidate = tuple[float, int, int, int]
"""(score, tie-break: higher wins, -start, end): a token window ``[start, end)``."""


def candidates(compiled: CompiledPrompt, words: Sequence[str]) -> list[Candidate]:
    """Every token window of ``words`` that matches the prompt, overlapping or not."""
    prompt = compiled.prompt
    if prompt.within is not None:
        return _unordered(compiled, words, prompt.within)
    if prompt.slop:
        return _sloppy(compiled, words)
    n = len(compiled.words)
    found: list[Candidate] = []
    sizes = (n, n - 1, n + 1) if prompt.fuzzy else (n,)
    cutoff = prompt.threshold * 100
    for size in sizes:
        if size < 1 or size > len(words):
            continue
        for i in range(len(words) - size + 1):
            window = words[i : i + size]
            if tuple(window) == compiled.words:
                found.append((1.0, 0, -i, i + size))
            elif prompt.fuzzy:
                score = fuzz.ratio(compiled.joined, " ".join(window), score_cutoff=cutoff)
                # numbers must be the same (checked only for the rare close window)
                if score >= cutoff and score > 0 and _numbers(window) == compiled.numbers:
                    found.append((min(score / 100, 0.9999), -abs(size - n), -i, i + size))
    return found


def _word_score(prompt: Prompt, wanted: str, word: str) -> float:
    """1.0 for the same word; a fuzzy prompt's words may differ a little (never numbers)."""
    if word == wanted:
        return 1.0
    if not prompt.fuzzy or any(c.isdigit() for c in wanted + word):
        return 0.0
    cutoff = prompt.threshold * 100
    score = fuzz.ratio(wanted, word, score_cutoff=cutoff)
    return min(score / 100, 0.9999) if score >= cutoff else 0.0


def _sloppy(compiled: CompiledPrompt, words: Sequence[str]) -> list[Candidate]:
    """The prompt's words in order, with at most ``slop`` other words between them."""
    prompt, wanted = compiled.prompt, compiled.words
    found: list[Candidate] = []
    for i in range(len(words)):
        first = _word_score(prompt, wanted[0], words[i])
        if not first:
            continue
        scores, pos, gaps = [first], i, 0
        for word in wanted[1:]:
            for step in range(1, prompt.slop - gaps + 2):
                if pos + step < len(words) and (
                    score := _word_score(prompt, word, words[pos + step])
                ):
                    scores.append(score)
                    gaps += step - 1
                    pos += step
                    break
            else:
                break
        if len(scores) == len(wanted):
            score = sum(scores) / len(scores)
            found.append((round(score if score < 1 else 1.0, 4), -gaps, -i, pos + 1))
    return found


def _unordered(compiled: CompiledPrompt, words: Sequence[str], within: int) -> list[Candidate]:
    """Every prompt word, in any order, in a run of at most ``within`` words: the
    shortest such run starting at each word that answers a prompt word."""
    prompt, wanted = compiled.prompt, compiled.words
    found: list[Candidate] = []
    for i in range(len(words)):
        if not any(_word_score(prompt, w, words[i]) for w in wanted):
            continue
        best: dict[int, float] = {}  # prompt word index -> its best score so far
        for j in range(i, min(len(words), i + within)):
            for k, w in enumerate(wanted):
                score = _word_score(prompt, w, words[j])
                if score > best.get(k, 0.0):
                    best[k] = score
            if len(best) == len(wanted):
                score = sum(best.values()) / len(wanted)
                found.append((round(score if score < 1 else 1.0, 4), -(j - i), -i, j + 1))
                break
    return found


def select(found: list[Candidate], blocked: Collection[int] = ()) -> list[tuple[float, int, int]]:
    """Non-overlapping (score, start, end) windows, best first, then in text
    order: the best window wins, then the next best that touches neither it
    nor a ``blocked`` token."""
    chosen: list[tuple[float, int, int]] = []
    taken: set[int] = set(blocked)
    for score, _, neg_start, end in sorted(found, reverse=True):
        span = range(-neg_start, end)
        if taken.isdisjoint(span):
            taken.update(span)
            chosen.append((round(score, 4), -neg_start, end))
    return sorted(chosen, key=lambda c: c[1])


def _make_match(
    prompt: Prompt,
    score: float,
    span: Sequence[Token],
    segment_id: str,
    text: str,
    start_ms: int,
    end_ms: int,
) -> MatchData:
    first, last = span[0].start, span[-1].end
    begin, finish = _char_to_ms(text, first, last, start_ms, end_ms)
    return MatchData(
        prompt_id=prompt.id,
        prompt=prompt.text,
        score=score,
        start_ms=begin,
        end_ms=finish,
        text=text[first:last],
        highlight=f"{_escape(text[:first])}<em>{_escape(text[first:last])}</em>{_escape(text[last:])}",
        segment_ids=(segment_id,),
    )


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _char_to_ms(text: str, first: int, last: int, start_ms: int, end_ms: int) -> tuple[int, int]:
    """Map a character span onto the segment's time span, proportionally."""
    lo = len(text) - len(text.lstrip())
    hi = len(text.rstrip())
    duration = max(0, end_ms - start_ms)
    chars = max(1, hi - lo)

    def at(pos: int) -> int:
        return start_ms + round(duration * min(max(pos - lo, 0), chars) / chars)

    return at(first), at(last)
