"""Text normalisation: the tokens that prompt matching, search and redaction compare.

Pure code, no I/O. :func:`normalize` makes recogniser output and user phrasing
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
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Token", "normalize"]


@dataclass(frozen=True, slots=True)
class Token:
    """A normalised word and its character span ``[start, end)`` in the original text."""

    text: str
    start: int
    end: int


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
