"""Personal data out of transcripts: found, then masked or replaced by its type.

Redaction runs in the worker on every final and partial before it is sent, so
nothing downstream (delivery, the store, the search index, matches, the
transcript) ever holds the original words. A session chooses a
:class:`~voxwire_client.api.RedactMode`: ``off``, ``mask`` (letters and digits
become ``*``, the shape stays), ``entity`` (the span becomes
``[CREDIT_CARD]``, ``[EMAIL_ADDRESS]``, ...) or ``numbers`` (``entity``, and
every other number of four digits or more becomes ``[NUMBER]``). A final's
words are redacted with its text: the words of a masked span are masked, those
of a replaced span become one word, its type (:meth:`Redactor.redact_segment`).

What is found, first by presidio-analyzer's pattern recognizers with their own
checks (no NLP model is needed or loaded), precise wherever a number stands alone:

==================  ==========================================================
CREDIT_CARD         13-19 digits passing the Luhn check
US_SSN              ``ddd-dd-dddd`` and 9 digits, without presidio's known-invalid
                    numbers; bare 9 digits only after words such as "social security"
PHONE_NUMBER        numbers ``phonenumbers`` accepts for US, GB, DE, FR, IL, IN,
                    CA, BR
EMAIL_ADDRESS       addresses with a known top-level domain (offline suffix list)
IBAN_CODE           IBANs passing the mod-97 check
STREET_ADDRESS      a house number, one to three words and a street type
                    ("1234 Main Street", "twelve Elm Ave"); the one pattern of ours
==================  ==========================================================

Then what speech recognition makes of them, where check digits cannot be
trusted (:mod:`voxwire.text.number_runs`):

==================  ==========================================================
CREDIT_CARD,        a number in a card, SSN, account or phone context (words
US_SSN,             before or after: "my card number is", "... is my social",
ACCOUNT_NUMBER,     "call me at") with roughly its digits, in any written form:
PHONE_NUMBER,       ``4,111,111,111,111,111,111``, ``4-1-1-1 ...``, "forty one
NUMBER              eleven", "four one one one", mixed, a digit missing or extra;
                    ``NUMBER`` after "my/your ... number"
NUMBER              anywhere: eight digits or more said one by one, twenty
                    digits or more, or sixteen or more written as one number
                    with thousands separators (no quantity is said that way)
US_SSN,             anywhere: three numbers of 3, 2 and 4 digits (3, 3 and 4),
PHONE_NUMBER        however written (``53.6, 22, 12.34``)
(the same entity)   a number in a context whatever its size when the engine
                    went into a loop right after it ("14-1, the land-run, the
                    land-run, the land-run")
==================  ==========================================================

and what the statement around them says (:mod:`voxwire.text.heard`):

==================  ==========================================================
EMAIL_ADDRESS       after "my email is", "email me at", "write to", "send it
                    to": the words up to a domain ("peter smith at gmail dot
                    com", "peter smith gmail.com", ``be just missed that
                    email.com``), or up to "at <word>" after an email word;
                    a domain written without its "at" (``betasmithatgmail.com``)
                    with two dots or more, or any domain after "email"/"mail"
STREET_ADDRESS      after "I live at", "my address is", "send it to": a house
                    number and the words after it, whatever the street type
                    became ("12 o'clock in", "42mm Avenue", "221B Baker Street")
IBAN_CODE           letters and digits said one by one or in groups that join
                    into an IBAN ("G B eight two, W E S T, ..."): with a valid
                    check, or after "IBAN", "account", "bank"
(the same entity)   the words between "is" and a personal number ("my IBAN is
                    VDA time, 3 7 0 4 ..."): an identifier's letters, misheard
==================  ==========================================================

Speech recognition writes what was said: "four one one one ..." or "jane dot
doe at example dot com". Each text is therefore also read in a *spoken view*:
numbers said in words become digits, digits said one after another join into
one number, and "dot"/"at" between words become "." and "@". What the
recognizers find there is mapped back to the words it came from.

A speaker pauses where they like: "my card number is 4111 1111" can be one
final and "1111 1111" the next. :meth:`Redactor.tail` says what a final ended
with (the context still open, the digits of a number at its very end); given
to the next final and its partials (``before``), a number at their start
continues it, and its context comes before the next final's first words (the
agent's "... the card number on the account?" | "Yes, it is 4,111,..."). A
number at the end of a final in a context is redacted from four digits on,
since it may go on. A final is never revised: a number whose context
comes only in the next final ("4111 1111" | "1111 1111 is my card") is redacted
in the second final only, unless it is said as an identifier (see above). A
statement carries over the same way: "my email is" | "peter smith at gmail dot
com", "I live at" | "12 Oak Lane".

A partial is an unfinished final: a card number half said is not yet a valid
card number. Partials are therefore redacted more broadly: also every number
of two digits or more (written or spoken), a digit at the end, every number in
a context whatever its size, every word mixing letters and digits ("V8i"),
every beginning of an email address ("jane dot doe at ...", the words after
"my email is") and a word followed by a trailing "dot" or "at". So a partial
never shows a digit the final will redact. Words before the words that make
them personal can show in a partial: the "jane" of "jane dot doe at example dot
com" until "dot" is said (outside an email statement), and the street name of
an address until its street type is said (outside "I live at ...").

People's names (``PERSON``) are found too where the ``redact_names`` setting
is on, and places (``LOCATION``) where ``redact_places`` is (both off by
default; :func:`find_names`): by spaCy's small English NER model
(:mod:`voxwire.text.names`), loaded once per worker, on finals and partials,
each read after the end of the finals before it (:attr:`Tail.said`), so that
"my name is John" | "Smith, ..." hides "Smith" too.

Counts per entity type are kept (``voxwire_redactions_total`` in
:mod:`voxwire.core.metrics`); the original text is never logged.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voxwire.core.metrics import REDACTIONS
from voxwire.text.heard import (
    STREET_TYPES,
    heard_addresses,
    heard_emails,
    spelled_ibans,
    statement_values,
)
from voxwire.text.names import NameFinder, context_of
from voxwire.text.normalization import normalize
from voxwire.text.number_runs import Tail, personal_runs, tail_of
from voxwire.text.words import Replacement, redact_words
from voxwire_client.api import RedactMode
from voxwire_client.messages import WordData

MIN_SCORE = 0.4
CONTEXT_BOOST = 0.35  # presidio's default context similarity factor
CONTEXT_WORDS_BEFORE = 6
CONTEXT_SCORE = 0.85  # a number in a context: below a recognizer's validated find
NAME_SCORE = 0.85  # a person's name or a place, as the names model finds it
NO_TAIL = Tail()

_STREET_TYPES = "|".join(STREET_TYPES)
_NOT_A_STREET_NAME = (
    "the|a|an|of|to|in|on|up|down|along|across|this|that|my|our|your|"
    "miles?|blocks?|feet|meters?|metres?|minutes?|houses?|doors?|times?"
)
_STREET_WORD = rf"(?!(?:{_NOT_A_STREET_NAME})\b)[A-Za-z]+\s+"
_STREET = (  # the house number can carry letters: "221B", or the engine's "42mm"
    rf"\b\d{{1,6}}(?:(?!st|nd|rd|th)[A-Za-z]{{1,2}}\s+(?:{_STREET_WORD}){{0,3}}"
    rf"|\s+(?:{_STREET_WORD}){{1,3}})(?:{_STREET_TYPES})\b"
)
_OBJECTS = frozenset({"me", "us", "him", "her", "them"})  # "reach me at ...": a word
_PARTIAL = (
    re.compile(r"\d{2,}|\d$"),  # numbers of two digits or more, and one at the end
    re.compile(r"\b(?:[A-Za-z]+\d|\d+[A-Za-z])\w*"),  # letters and digits: "V8i", "B82"
    re.compile(r"\w+[.@]\w[\w.@]*"),  # the beginnings of email addresses
    re.compile(r"\w+ (?:dot|at)$", re.IGNORECASE),  # an address being spelled out
)


@dataclass(frozen=True, slots=True)
class Finding:
    """Personal data at ``[start, end)`` of the original text."""

    entity: str
    start: int
    end: int
    score: float


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    start: int  # the original characters it stands for
    end: int


class Redactor:
    """Finds and redacts personal data; build once (loading the recognizers
    takes about a second) and share: it keeps no state between calls.
    ``names``: people's names (``PERSON``) and places (``LOCATION``) are found
    too, those its finder finds."""

    def __init__(self, min_score: float = MIN_SCORE, names: NameFinder | None = None) -> None:
        self._recognizers = _recognizers()
        self._min_score = min_score
        self._names = names

    def find(
        self,
        text: str,
        *,
        partial: bool = False,
        numbers: bool = False,
        before: Tail = NO_TAIL,
    ) -> list[Finding]:
        """What is personal in ``text``, spans merged where they overlap:
        ``before`` is what the session's previous final ended with
        (:meth:`tail`); ``numbers`` adds every number of four digits or more."""
        found = self._analyze(text, None)
        spans = spelled_ibans(text)  # first: an IBAN is also an account number
        numbered = personal_runs(text, before, numbers=numbers, partial=partial)
        personal = personal_runs(text, before, partial=partial) if numbers else numbered
        spans += statement_values(text, spans + personal) + numbered
        spans += heard_emails(text, before.words, partial=partial)
        spans += heard_addresses(text, before.words)
        found += [
            Finding(s.entity, s.start, s.end, CONTEXT_SCORE if s.entity != "NUMBER" else 0.0)
            for s in spans
        ]
        if self._names is not None:
            named = self._names.find(text, before.said)
            found += [Finding(n.entity, n.start, n.end, NAME_SCORE) for n in named]
        pieces = _spoken_view(text)
        view = "".join(p.text for p in pieces)
        if view != text:
            found += self._analyze(view, pieces)
        if partial:
            found += [
                _back(pieces, m.start(), m.end(), "PARTIAL", 1.0)
                for pattern in _PARTIAL
                for m in pattern.finditer(view)
            ]
        return _merge(found)

    def redact(
        self, text: str, mode: RedactMode, *, partial: bool = False, before: Tail = NO_TAIL
    ) -> str:
        """``text`` with what :meth:`find` finds masked or replaced (``mode``),
        after a final that ended with ``before``; counts what a final had
        redacted (:data:`voxwire.core.metrics.REDACTIONS`)."""
        return self.redact_segment(text, (), mode, partial=partial, before=before)[0]

    def redact_segment(
        self,
        text: str,
        words: Sequence[WordData],
        mode: RedactMode,
        *,
        partial: bool = False,
        before: Tail = NO_TAIL,
    ) -> tuple[str, tuple[WordData, ...]]:
        """:meth:`redact` for a segment's text and its ``words``: the words of a
        redacted span are masked, or become its type, as the text is
        (:func:`voxwire.text.words.redact_words`)."""
        if mode is RedactMode.OFF or not text:
            return text, tuple(words)
        replaced = []
        numbers = mode is RedactMode.NUMBERS
        for f in self.find(text, partial=partial, numbers=numbers, before=before):
            entity = f.entity if f.entity != "PARTIAL" else "REDACTED"
            replaced.append(
                Replacement(f.start, f.end, None if mode is RedactMode.MASK else f"[{entity}]")
            )
            if not partial:
                REDACTIONS.labels(f.entity).inc()
        out, pos = [], 0
        for r in replaced:
            out.append(text[pos : r.start])
            out.append(re.sub(r"\w", "*", text[r.start : r.end]) if r.text is None else r.text)
            pos = r.end
        out.append(text[pos:])
        return "".join(out), redact_words(text, words, replaced)

    @staticmethod
    def tail(text: str, before: Tail = NO_TAIL) -> Tail:
        """What the final ``text`` hands to the session's next final (it
        followed one that ended with ``before``)."""
        return dataclasses.replace(tail_of(text, before), said=context_of(text, before.said))

    def _analyze(self, view: str, pieces: Sequence[_Piece] | None) -> list[Finding]:
        """Findings in ``view``, mapped back through ``pieces`` (None: ``view``
        is the original text)."""
        found = []
        words = [(m.start(), m.group().lower()) for m in re.finditer(r"[A-Za-z]+", view)]
        for recognizer in self._recognizers:
            for result in recognizer.analyze(view, recognizer.supported_entities, None):
                score = float(result.score)
                if score < self._min_score and _in_context(recognizer, words, result.start):
                    score = min(1.0, max(score + CONTEXT_BOOST, self._min_score))
                if score < self._min_score:
                    continue
                entity = result.entity_type
                if pieces is None:
                    found.append(Finding(entity, result.start, result.end, score))
                else:
                    found.append(_back(pieces, result.start, result.end, entity, score))
        return found


@dataclass
class _Choice:
    names: bool = False
    places: bool = False


_CHOSEN = _Choice()


def find_names(on: bool, places: bool = False) -> None:
    """Whether this process's redactor finds people's names (the ``redact_names``
    setting, given when a worker starts) and places (``redact_places``); either
    on, the model is loaded now, once."""
    if (on, places) != (_CHOSEN.names, _CHOSEN.places):
        _CHOSEN.names, _CHOSEN.places = on, places
        redactor.cache_clear()
    if on or places:
        redactor()


@functools.cache
def redactor() -> Redactor:
    """The process's redactor, built on first use (with :func:`find_names`'s choice)."""
    names, places = _CHOSEN.names, _CHOSEN.places
    return Redactor(names=NameFinder(names=names, places=places) if names or places else None)


def _in_context(recognizer: Any, words: list[tuple[int, str]], start: int) -> bool:
    """Whether one of the recognizer's context words is among the words just before."""
    context = {w.lower() for w in (recognizer.context or ())}
    before = [w for pos, w in words if pos < start][-CONTEXT_WORDS_BEFORE:]
    return any(w in context for w in before)


def _spoken_view(text: str) -> list[_Piece]:
    """``text`` as it would be written: numbers as digits, consecutive digits
    joined, "dot" and "at" between words as "." and "@" (not the "at" of "reach
    me at"), a "." written between words kept; each piece keeps the original
    characters it stands for."""
    tokens = normalize(text)
    pieces: list[_Piece] = []
    before = ""
    for n, token in enumerate(tokens):
        word = token.text
        following = tokens[n + 1].text if n + 1 < len(tokens) else ""
        said_at = word == "at" and before.lower() not in _OBJECTS
        if before and (word == "dot" or said_at) and following[:1].isalpha():
            written = "." if word == "dot" else "@"
        elif word.isdigit():
            written = word
        else:
            written = text[token.start : token.end]
        if n and written[:1].isalpha() and text[tokens[n - 1].end : token.start] == ".":
            pieces.append(_Piece(".", tokens[n - 1].end, token.start))  # "gmail.com"
            before = "."
        glued = written in (".", "@") or before in (".", "@")
        if before and not glued and not (written.isdigit() and before.isdigit()):
            pieces.append(_Piece(" ", token.start, token.start))
        pieces.append(_Piece(written, token.start, token.end))
        before = written
    return pieces


def _back(pieces: Sequence[_Piece], start: int, end: int, entity: str, score: float) -> Finding:
    """The original span of view characters ``[start, end)``."""
    first = last = None
    pos = 0
    for piece in pieces:
        if pos < end and pos + len(piece.text) > start and piece.text.strip():
            first = piece if first is None else first
            last = piece
        pos += len(piece.text)
    assert first is not None and last is not None
    return Finding(entity, first.start, last.end, score)


def _merge(found: list[Finding]) -> list[Finding]:
    merged: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            best = last if last.score >= f.score else f
            merged[-1] = Finding(best.entity, last.start, max(last.end, f.end), best.score)
        else:
            merged.append(f)
    return merged


@functools.cache
def _recognizers() -> tuple[Any, ...]:
    # Imported here: presidio takes about a second to import, and only
    # workers of sessions that redact need it.
    import tldextract
    from presidio_analyzer import Pattern, PatternRecognizer
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        PhoneRecognizer,
        UsSsnRecognizer,
    )

    offline = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        """presidio's, with the suffix list shipped in tldextract: no download."""

        def validate_result(self, pattern_text: str) -> bool:
            return bool(offline(pattern_text.split("@")[-1]).suffix)

    street = PatternRecognizer(
        supported_entity="STREET_ADDRESS",
        patterns=[Pattern("street address", _STREET, 0.6)],
        context=["live", "lives", "address", "at"],
        global_regex_flags=re.IGNORECASE,
    )
    return (
        CreditCardRecognizer(),
        UsSsnRecognizer(),
        PhoneRecognizer(),
        OfflineEmailRecognizer(),
        IbanRecognizer(),
        street,
    )
