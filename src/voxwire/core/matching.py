"""Prompt matching: find the phrases a user asked for in committed transcript segments.

Pure code, no I/O. A user uploads audio with prompts (phrases); every committed
segment is checked against every prompt::

    matcher = PromptMatcher([Prompt(id="p1", text="ask not")])
    for hit in matcher.match("seg-3", "And so, ask not what...", 2_000, 9_000):
        ...  # hit.score, hit.start_ms, hit.end_ms, hit.highlight

Normalisation (:func:`normalize`) makes recogniser output and user phrasing
comparable: lower case, accents and punctuation dropped, apostrophes removed
(``don't`` -> ``dont``), numbers written as words turned into digits
(``twelve`` -> ``12``, ``a hundred and five`` -> ``105``, ``thousand`` ->
``1000``, ``three point five`` -> ``3.5``, ``nineteen sixty one`` -> ``1961``,
``twenty twenty`` -> ``2020``),
digit groups joined (``1,000`` -> ``1000``) and ``%`` / ``per cent`` read as
``percent``; so "twelve percent", "12%" and "12 percent" are the same tokens.
Digits in a row stay separate numbers (``one two three`` -> ``1 2 3``). Every
token keeps its character span in the original text, for highlighting.
The converter is our own: text2num's ``alpha2digit`` rewrites the whole string
and loses those spans, leaves a lone ``one`` as a word and turns "nineteen
sixty one" into "19 61".

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
errors of a few hundred milliseconds within long segments; word timestamps
would make this exact.

Highlighting. ``Match.highlight`` is the segment's text, HTML-escaped, with the
matched span wrapped in ``<em>...</em>``: it is safe to insert as HTML.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

__all__ = [
    "CompiledPrompt",
    "Match",
    "Prompt",
    "PromptMatcher",
    "Token",
    "candidates",
    "normalize",
    "select",
]


@dataclass(frozen=True, slots=True)
class Token:
    """A normalised word and its character span ``[start, end)`` in the original text."""

    text: str
    start: int
    end: int


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
class Match:
    """A prompt heard in a segment."""

    prompt_id: str
    prompt: str
    """The prompt's text as the user gave it."""
    score: float
    """1.0 for an exact token match, else the fuzzy score in [threshold, 1)."""
    start_ms: int
    end_ms: int
    """Estimated from the match's character position within the segment."""
    text: str
    """The matched words as they appear in the segment."""
    highlight: str
    """The segment's text, HTML-escaped, with the match wrapped in ``<em>...</em>``."""
    segment_ids: tuple[str, ...]


# --- normalisation ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"(?P<num>\d+(?:,\d{3})*(?:\.\d+)?)(?![^\W_])"  # 12, 1,000, 3.5 (not 12th, 5pm)
    r"|(?P<word>[^\W_]+(?:['’][^\W_]+)*)"  # words, don't, 12th
    r"|(?P<pct>%)"
)
_UNITS = {
    w: i
    for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven",
                           "eight", "nine"))
}  # fmt: skip
_TEENS = {
    w: 10 + i
    for i, w in enumerate(("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                           "sixteen", "seventeen", "eighteen", "nineteen"))
}  # fmt: skip
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                           "ninety"))
}  # fmt: skip
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}


def normalize(text: str) -> list[Token]:
    """Split ``text`` into normalised tokens that keep their character spans."""
    raw: list[Token] = []
    for m in _TOKEN.finditer(text):
        if m.group("num") is not None:
            word = m.group("num").replace(",", "")
        elif m.group("pct") is not None:
            word = "percent"
        else:
            word = _fold(m.group("word"))
        raw.append(Token(word, m.start(), m.end()))
    return _join_percent(_words_to_numbers(raw))


def _fold(word: str) -> str:
    """Lower case, accents dropped, apostrophes removed."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c) and c not in "'’")


def _join_percent(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for tok in tokens:
        if tok.text == "cent" and out and out[-1].text == "per":
            out[-1] = Token("percent", out[-1].start, tok.end)
        else:
            out.append(tok)
    return out


def _words_to_numbers(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        parsed = _parse_number(tokens, i)
        if parsed is None:
            out.append(tokens[i])
            i += 1
            continue
        value, j = parsed
        out.append(Token(value, tokens[i].start, tokens[j - 1].end))
        i = j
    return out


def _word_value(word: str) -> tuple[str, int] | None:
    """The kind and value of a number word, or None."""
    if word in _UNITS:
        return "unit", _UNITS[word]
    if word in _TEENS:
        return "teen", _TEENS[word]
    if word in _TENS:
        return "tens", _TENS[word]
    if word == "hundred":
        return "hundred", 100
    if word in _SCALES:
        return "scale", _SCALES[word]
    return None


_SMALL = ("unit", "teen", "tens")
# After which kinds each kind may follow inside one number ("and" is handled apart).
_MAY_FOLLOW: dict[str, set[str | None]] = {
    "unit": {None, "tens", "hundred", "scale", "and"},
    "teen": {None, "hundred", "scale", "and"},
    "tens": {None, "hundred", "scale", "and"},
    "hundred": {None, "unit", "teen", "tens", "digits"},
    "scale": {None, "unit", "teen", "tens", "hundred", "digits"},
}


def _parse_number(tokens: Sequence[Token], i: int) -> tuple[str, int] | None:
    """Read a number written in words (or digits and scale words) starting at ``i``.

    Returns its digits and the index after it, or None when ``i`` starts no
    number that needs rewriting (a plain digit token stays as it is).
    """
    last: str | None = None  # kind of the last word read
    total, current, last_scale, words, j = 0, 0, 10**15, 0, i
    while j < len(tokens):
        word = tokens[j].text
        nxt = _word_value(tokens[j + 1].text) if j + 1 < len(tokens) else None
        if word == "and" and last in ("hundred", "scale") and nxt and nxt[0] in _SMALL:
            last, j = "and", j + 1
            continue
        if word == "a" and last is None and nxt and nxt[0] in ("hundred", "scale"):
            current, last, j = 1, "unit", j + 1
            continue
        if last is None and word.isdigit() and int(word) < 1000:
            current, last, j = int(word), "digits", j + 1
            continue
        kind_value = _word_value(word)
        if kind_value is None or last not in _MAY_FOLLOW[kind_value[0]]:
            break
        kind, value = kind_value
        if kind == "unit" and value == 0 and last is not None:
            break
        if last is None and kind in ("hundred", "scale"):
            current = 1  # "thousand" alone, as "a thousand"
        if kind == "hundred":
            if current >= 100:
                break
            current *= 100
        elif kind == "scale":
            if value >= last_scale:
                break
            total, current, last_scale = total + current * value, 0, value
        else:
            current += value
        last, words, j = kind, words + 1, j + 1
        if kind == "unit" and value == 0:
            break  # "zero" stands alone
    if words == 0:
        return None  # nothing but a digit token, or no number at all
    value = total + current
    if last in ("teen", "tens") and total == 0 and 11 <= value <= 20:
        year = _year_tail(tokens, j)  # nineteen sixty one, twenty twenty
        if year is not None:
            return str(value * 100 + year[0]), year[1]
    return _decimal_tail(tokens, j, str(value))


def _year_tail(tokens: Sequence[Token], j: int) -> tuple[int, int] | None:
    """A two-digit group after a century word: "sixty one", "oh five", "ten"."""
    words = [t.text for t in tokens[j : j + 2]]
    if len(words) == 2 and words[0] == "oh" and words[1] in _UNITS and _UNITS[words[1]] > 0:
        return _UNITS[words[1]], j + 2
    if words and words[0] in _TEENS:
        return _TEENS[words[0]], j + 1
    if words and words[0] in _TENS:
        unit = _UNITS.get(words[1], 0) if len(words) == 2 else 0
        return _TENS[words[0]] + unit, j + (2 if unit else 1)
    return None


def _decimal_tail(tokens: Sequence[Token], j: int, digits: str) -> tuple[str, int]:
    """Append "point five", "point one four" to a number."""
    if j + 1 >= len(tokens) or tokens[j].text != "point" or tokens[j + 1].text not in _UNITS:
        return digits, j
    decimals = ""
    k = j + 1
    while k < len(tokens) and tokens[k].text in _UNITS:
        decimals += str(_UNITS[tokens[k].text])
        k += 1
    return f"{digits}.{decimals}", k


# --- matching -----------------------------------------------------------------------------------


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

    def match(self, segment_id: str, text: str, start_ms: int, end_ms: int) -> list[Match]:
        """Every prompt heard in this segment, by prompt then position."""
        tokens = normalize(text)
        if not tokens:
            return []
        words = [t.text for t in tokens]
        matches: list[Match] = []
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
) -> Match:
    first, last = span[0].start, span[-1].end
    begin, finish = _char_to_ms(text, first, last, start_ms, end_ms)
    return Match(
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
