"""What a search asks for (:class:`voxwire_client.api.SearchQuery`), parsed the
same way for every backend.

A query string is words and quoted phrases; every other character is text::

    twelve percent            both words, in any order, anywhere in a segment
    "ask not what"            these words in this order
    amercans  (fuzzy=true)    also words one or two edits away ("americans")

Words are normalised as transcripts are (:func:`voxwire.text.normalization.normalize`):
case, accents and punctuation do not matter, and numbers match as digits or
words ("twelve percent" finds "12%", "1813" finds "eighteen thirteen"). Both
backends stem English words (Porter), so "count" finds "counted". There is no
operator syntax: ``AND``, ``*``, ``:``, ``(``, ``{`` or JSON in a query are
searched as text, so a query can never change what is searched or where.

Filters narrow the segments searched: sessions, a time window within the
audio (segments overlapping ``[start_ms, end_ms)``), when the session was
created, and its language. Hits come best first (BM25); ``offset`` and
``size`` page through them.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

import snowballstemmer
from rapidfuzz.distance import Levenshtein

from voxwire.core.errors import VoxwireError
from voxwire.text.normalization import normalize
from voxwire_client.api import (
    MAX_OFFSET,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    SearchHit,
    SearchPage,
    SearchQuery,
)

MAX_WORDS = 32
_PORTER = snowballstemmer.stemmer("porter")


class SearchQueryError(VoxwireError):
    """A query that cannot be searched: no words in it, or too many."""

    code = "bad_query"


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """Normalised words (all required) and phrases (words in order)."""

    words: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]

    @property
    def all_words(self) -> tuple[str, ...]:
        return self.words + tuple(w for phrase in self.phrases for w in phrase)

    def windows_for(self, speaker: str | None) -> ParsedQuery:
        """What the windows are searched for: the query itself, or with a
        ``speaker`` filter its words in any order (a window also holds what
        others said between the speaker's words; the speaker's own segments
        are checked for the phrases afterwards, :func:`voxwire.search.spans.window_hits`)."""
        if speaker is None:
            return self
        return ParsedQuery(tuple(dict.fromkeys(self.all_words)), ())


_QUOTED = re.compile(r'"([^"]*)"')


def parse_query(text: str) -> ParsedQuery:
    """Split a query into words and phrases; raise SearchQueryError if none."""
    phrases: list[tuple[str, ...]] = []
    words: list[str] = []
    rest = _QUOTED.sub(" ", text)
    for quoted in _QUOTED.findall(text):
        phrase = tuple(t.text for t in normalize(quoted))
        if len(phrase) == 1:
            words.extend(phrase)
        elif phrase:
            phrases.append(phrase)
    words.extend(t.text for t in normalize(rest))
    words = list(dict.fromkeys(words))  # a repeated word adds nothing
    parsed = ParsedQuery(tuple(words), tuple(dict.fromkeys(phrases)))
    count = len(parsed.all_words)
    if count == 0:
        raise SearchQueryError(
            f"the query {text[:80]!r} has no words to search for",
            hint="search for words or a quoted phrase",
        )
    if count > MAX_WORDS:
        raise SearchQueryError(
            f"the query has {count} words; at most {MAX_WORDS} are searched",
            hint="use fewer words",
        )
    return parsed


def fuzzy_distance(word: str) -> int:
    """Edits allowed for ``word`` in a fuzzy search (OpenSearch's AUTO)."""
    if word.isdigit():
        return 0  # 1961 never finds 1962
    return 0 if len(word) <= 2 else 1 if len(word) <= 5 else 2


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The Porter stem of a normalised word, as both backends index it (cached:
    the stemmer is pure Python, and the same words come back all the time)."""
    return str(_PORTER.stemWord(word))


def highlight(text: str, parsed: ParsedQuery, *, fuzzy: bool = False) -> str:
    """``text`` HTML-escaped, with the words that answer the query in ``<em>``:
    those with the stem of a query word or, in a fuzzy search, a stem within
    the word's fuzzy distance of one."""
    wanted = {stem(w) for w in parsed.all_words}
    out: list[str] = []
    pos = 0
    for token in normalize(text):
        if answers(stem(token.text), wanted, fuzzy):
            out.append(html.escape(text[pos : token.start]))
            out.append(f"<em>{html.escape(text[token.start : token.end])}</em>")
            pos = token.end
    out.append(html.escape(text[pos:]))
    return "".join(out)


def answers(word: str, wanted: set[str], fuzzy: bool) -> bool:
    """Whether the stem ``word`` is one of the ``wanted`` stems or, when
    ``fuzzy``, within the fuzzy distance of one."""
    if word in wanted:
        return True
    return fuzzy and any(
        Levenshtein.distance(word, w, score_cutoff=fuzzy_distance(w)) <= fuzzy_distance(w)
        for w in wanted
    )


__all__ = [
    "MAX_OFFSET",
    "MAX_PAGE",
    "MAX_QUERY_CHARS",
    "ParsedQuery",
    "SearchHit",
    "SearchPage",
    "SearchQuery",
    "SearchQueryError",
    "answers",
    "fuzzy_distance",
    "highlight",
    "parse_query",
    "stem",
]
