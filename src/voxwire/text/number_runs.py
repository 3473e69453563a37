"""Numbers as speech recognition writes them, and the words around them that
make them personal. Pure code, no I/O; :mod:`voxwire.text.redaction` uses it.

A *run* is a number however it came out of the engine: ``4111 1111``,
``4,111,111,111,111,111,111``, ``4-1-1-1``, ``forty one eleven``, ``four one one
one``, ``fifty five oh zero``, mixed, one number or several separated only by
spaces and punctuation. Its size is the count of digits it stands for ("oh"
and a "for", "to", "won" or "ate" heard before a digit count as one), whatever
its check digits say: recognition drops, adds and regroups digits.

A run is personal anywhere when it is said the way no quantity is: at least
:data:`ONE_BY_ONE` digits one by one ("two one nine oh nine nine ...",
"5 5 0 0 0 ..."), :data:`LONG_RUN` digits in all (the engine sometimes
writes a card number as ``6,111,000,000,...``) or one number of
:data:`GROUPED_RUN` digits or more written with thousands separators (the
engine's ``4,111,111,111,111,111,111`` for a card number said digit by digit);
it is then a ``NUMBER``. So is one grouped as an SSN (3, 2 and 4 digits) or a
US phone number (3, 3, 4) are, however the engine wrote the groups ("fifty
three six, twenty two, twelve thirty four" came out as ``53.6, 22, 12.34``); it
is then of that entity; and one in four groups of four digits is a card number
when its check digit holds or commas part its groups (:data:`CARD_GROUPS`).
Otherwise it is personal when a context word is near it, before (up to
:data:`WORDS_BEFORE` words) or after (up to :data:`WORDS_AFTER`), the nearest
deciding, and it has at least the digits of its context, fewer than the real
numbers have so that a digit missing still counts:

==================  ===============================================  ======
CREDIT_CARD         card, credit, debit, visa, mastercard, amex         8
US_SSN              social (security), SSN                              7
ACCOUNT_NUMBER      account, IBAN, routing, bank, sort (code)           6
PHONE_NUMBER        phone, call, mobile, cell, telephone, fax, ...      6
NUMBER              my/your/... number, digits (none of the above)      6
==================  ===============================================  ======

A run in a context is personal whatever its size when the engine went into a
loop right after it ("the credit card is 14-1, the land-run, the land-run, the
land-run"): the rest of its digits were lost in the loop.

A session's finals are cut wherever the speaker paused, so a number can be split
over two of them ("my card number is 4111 1111" | "1111 1111"), and an answer
is cut from its question ("Can you confirm the card number on the account?" |
"Yes, it is 4,111,..."). :class:`Tail` carries what a final ended with to the
next: its last words (the context, read as the words before the next final's
own, within the same :data:`WORDS_BEFORE`) and the digits of a run at its very
end. A run at the end of a final in a context is personal from four digits on
(it may go on in the next final); a run at the start of the next one continues it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from voxwire.text.normalization import Token, normalize

__all__ = ["MIN_DIGITS", "Run", "Span", "Tail", "personal_runs", "runs", "tail_of"]

WORDS_BEFORE = 6
WORDS_AFTER = 4
NUMBERS_MIN_DIGITS = 4
"""The ``numbers`` policy: every run of at least this many digits."""
TAIL_MIN_DIGITS = 4
"""A run that ends a final in a context is personal from this many digits on
(fewer: "call me at five thirty" keeps its time)."""
LONG_RUN = 20
GROUPED_RUN = 16
"""One number written with thousands separators and at least this many digits
(``4,111,111,111,111,111,111``) is an identifier: quadrillions are not said aloud
as quantities, and the engine writes digits said one by one that way."""
_GROUPED = re.compile(  # 1 to 3 digits, then groups of 3 to GROUPED_RUN digits or more
    rf"(?<![\d,])\d{{1,3}}(?:,\d{{3}}){{{(GROUPED_RUN - 1) // 3},}}(?![\d,]\d)"
)
ONE_BY_ONE = 8
SHAPES = {(3, 2, 4): "US_SSN", (3, 3, 4): "PHONE_NUMBER"}
"""Numbers grouped as these are written, in any form (``53.6, 22, 12.34``), are
personal anywhere: no quantity is said in three groups of exactly these sizes."""
CARD_GROUPS = (4, 4, 4, 4)
"""A number in four groups of four digits is a card number anywhere when its
check digit holds, or when commas part the groups (``1111,1111,1111, 1111``: the
engine's writing of a card number said in groups, digits lost; no quantity is
written so). Spaces alone and a failed check (``reference 4111 1111 1111 1112``)
need a context."""
LOOP_WORDS = 6
LOOP_TIMES = 3
"""A phrase of up to :data:`LOOP_WORDS` words said :data:`LOOP_TIMES` times in a
row right after a number in a context: the engine lost the number's digits in a
loop, so the number is personal whatever its size."""
BRIDGE_WORDS = 3
"""Runs in one context with at most this many words between them count as one
number (the words were digits misheard: "6011, nearly 09, 9013")."""

CONTEXT_WORDS = {
    "CREDIT_CARD": ("card", "cards", "credit", "debit", "visa", "mastercard", "amex"),
    "US_SSN": ("social", "ssn"),
    "ACCOUNT_NUMBER": ("account", "accounts", "iban", "routing", "bank", "sort", "acct"),
    "PHONE_NUMBER": (
        "phone", "call", "calling", "mobile", "cell", "telephone", "fax", "dial", "reach",
        "text", "extension", "whatsapp",
    ),
    "NUMBER": ("number", "numbers", "digits"),
}  # fmt: skip
MIN_DIGITS = {"CREDIT_CARD": 8, "US_SSN": 7, "ACCOUNT_NUMBER": 6, "PHONE_NUMBER": 6, "NUMBER": 6}
_ENTITY_OF = {word: entity for entity, words in CONTEXT_WORDS.items() for word in words}

_POSSESSIVE = frozenset({"my", "your", "his", "her", "our", "their"})
_ZERO = frozenset({"oh", "o"})  # a digit when next to one
_SOUNDALIKE = frozenset({"for", "to", "too", "won", "ate", "double", "triple"})  # before a digit
_CLOCK = re.compile(r"\d{1,2}:\d{2}")
_GAP = re.compile(r"[\s,.\-–—/()+:;#*]*")


@dataclass(frozen=True, slots=True)
class Run:
    """A number at ``[start, end)`` of a text, standing for ``digits`` digits."""

    start: int
    end: int
    digits: int
    single_digits: int = 0
    """How many of its digits were said (or written) one by one."""
    groups: tuple[int, ...] = ()
    """The digits of each number it is made of, in order (``53.6, 22, 12.34``: 3, 2, 4)."""


@dataclass(frozen=True, slots=True)
class Span:
    """A personal number at ``[start, end)``, of ``entity`` (a context's, or
    ``NUMBER`` under the numbers policy)."""

    entity: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Tail:
    """What a final ended with, for the next final of the session: its last
    words (lower case, at most :data:`WORDS_BEFORE`) and the digits of the run
    it ended with (0: it did not end with a number)."""

    words: tuple[str, ...] = ()
    digits: int = 0
    said: str = ""
    """The end of the text said so far, as written (:func:`voxwire.text.names.context_of`):
    what the names model reads before the next final."""


def runs(text: str) -> list[Run]:
    """The numbers of ``text``, in order."""
    tokens = normalize(text)
    found: list[Run] = []
    group: list[tuple[int, int, int]] = []  # (start, end, digits); digits -1: a soundalike
    for n, token in enumerate(tokens):
        digits = _digits(token.text, tokens[n - 1].text if n else "", _next(tokens, n))
        joined = bool(group) and _GAP.fullmatch(text[group[-1][1] : token.start]) is not None
        if digits and joined:
            group.append((token.start, token.end, digits))
            continue
        found += _close(group)
        group = [(token.start, token.end, digits)] if digits else []
    return found + _close(group)


def personal_runs(
    text: str, before: Tail = Tail(), *, numbers: bool = False, partial: bool = False
) -> list[Span]:
    """The runs of ``text`` that are personal, after a final that ended with
    ``before``: in a context with the digits it wants; at the end, in a context,
    from :data:`TAIL_MIN_DIGITS`; continuing ``before``'s run. ``numbers``: every
    run of :data:`NUMBERS_MIN_DIGITS` or more too. ``partial`` (an unfinished
    text): every run in a context, and every run under ``numbers``, whatever its size."""
    found: list[Span] = []
    for s in _situated(text, before):
        clock = _CLOCK.fullmatch(text[s.run.start : s.run.end])  # "call me at 10:30"
        if (
            s.entity is not None
            and not clock
            and (
                s.digits >= MIN_DIGITS[s.entity]
                or s.carried
                or partial
                or (s.at_end and s.digits >= TAIL_MIN_DIGITS)
                or s.looped
            )
        ):
            start = s.run.start
            if s.cluster_start < s.run.start and found and found[-1].start == s.cluster_start:
                start = found.pop().start  # the words between were misheard digits
            found.append(Span(s.entity, start, s.run.end))
        elif s.run.groups in SHAPES:
            found.append(Span(SHAPES[s.run.groups], s.run.start, s.run.end))
        elif s.run.groups == CARD_GROUPS and _a_card(text[s.run.start : s.run.end]):
            found.append(Span("CREDIT_CARD", s.run.start, s.run.end))
        elif _said_as_an_identifier(text, s.run) or (
            numbers
            and (
                s.run.digits >= NUMBERS_MIN_DIGITS
                or s.carried
                or partial
                or (s.at_end and s.run.digits >= TAIL_MIN_DIGITS)
            )
        ):
            found.append(Span("NUMBER", s.run.start, s.run.end))
    return found


def tail_of(text: str, before: Tail = Tail()) -> Tail:
    """What the final ``text`` (after one that ended with ``before``) hands to
    the next: the context still open at its end (the words after its last
    number, or those before it when it ends with one) and the digits of the
    number it ends with."""
    situated = _situated(text, before)
    words = _words(text, [s.run for s in situated])
    if not situated:
        context = [*before.words, *(w for _, w in words)]
    elif situated[-1].at_end:
        start = situated[-1].cluster_start
        context = [*before.words, *(w for pos, w in words if pos < start)]
    else:
        context = [w for pos, w in words if pos >= situated[-1].run.end]
    digits = situated[-1].digits if situated and situated[-1].at_end else 0
    return Tail(tuple(context[-WORDS_BEFORE:]), digits)


def _a_card(written: str) -> bool:
    """Whether a number in :data:`CARD_GROUPS` is a card number without context."""
    if "," in written:
        return True
    digits = [int(c) for c in written if c.isdigit()]
    if len(digits) != 16:
        return False
    total = sum(
        d if i % 2 == 0 else (2 * d - 9 if d > 4 else 2 * d) for i, d in enumerate(reversed(digits))
    )
    return total % 10 == 0


def _said_as_an_identifier(text: str, run: Run) -> bool:
    """A number no one says as a quantity: :data:`ONE_BY_ONE` digits one by
    one, :data:`LONG_RUN` digits or more, or one number of :data:`GROUPED_RUN`
    digits or more written with thousands separators."""
    return (
        run.digits >= LONG_RUN
        or run.single_digits >= ONE_BY_ONE
        or _GROUPED.search(text, run.start, run.end) is not None
    )


def _digits(word: str, previous: str, following: str) -> int:
    """How many digits ``word`` stands for; -1 for a soundalike of one."""
    count = sum(c.isdigit() for c in word)
    if count:
        return count
    lower = word.lower()
    if lower in _ZERO and (_has_digit(previous) or _has_digit(following)):
        return 1
    if lower in _SOUNDALIKE and _has_digit(following):
        return -1
    return 0


def _has_digit(word: str) -> bool:
    return any(c.isdigit() for c in word) or word.lower() in _ZERO


def _next(tokens: Sequence[Token], n: int) -> str:
    return tokens[n + 1].text if n + 1 < len(tokens) else ""


def _close(group: list[tuple[int, int, int]]) -> list[Run]:
    """A run of ``group``, without soundalikes at its end; none without a digit."""
    while group and group[-1][2] < 0:
        group = group[:-1]
    if not any(d > 0 for _, _, d in group):
        return []
    single = sum(1 for _, _, d in group if d == 1)
    sizes = tuple(abs(d) for _, _, d in group)
    return [Run(group[0][0], group[-1][1], sum(sizes), single, sizes)]


def _words(text: str, found: list[Run]) -> list[tuple[int, str]]:
    """The words of ``text`` outside its runs, lower case, with where they start."""
    return [
        (m.start(), m.group().lower())
        for m in re.finditer(r"[^\W\d_]+", text)
        if not any(r.start <= m.start() < r.end for r in found)
    ]


@dataclass(frozen=True, slots=True)
class _Situated:
    run: Run
    entity: str | None
    """The context of the run's cluster: runs with at most :data:`BRIDGE_WORDS`
    words between them ("6011, nearly 09, 9013" where "oh" was misheard)."""
    digits: int
    """The cluster's digits, with those it continues from the previous final."""
    carried: int
    at_end: bool
    """Whether the cluster ends the text."""
    cluster_start: int
    looped: bool = False
    """Whether the engine went into a loop right after the cluster ("14-1, the
    land-run, the land-run, the land-run"): the rest of the number is lost in it."""


def _situated(text: str, before: Tail) -> list[_Situated]:
    """Each run of ``text`` in its cluster and context, after ``before``."""
    found = runs(text)
    words = _words(text, found)
    clusters: list[list[int]] = []
    for n, run in enumerate(found):
        between = [w for pos, w in words if n and found[n - 1].end <= pos < run.start]
        if n and len(between) <= BRIDGE_WORDS and not any(w in _ENTITY_OF for w in between):
            clusters[-1].append(n)
        else:
            clusters.append([n])
    situated = []
    for cluster in clusters:
        first, last = found[cluster[0]], found[cluster[-1]]
        preceding = [w for pos, w in words if pos < first.start]
        carried = before.digits if cluster[0] == 0 and not preceding else 0
        following = [w for pos, w in words if pos >= last.end][:WORDS_AFTER]
        # the previous final's words come before (its question: "... the card number?")
        preceding = [*before.words, *preceding]
        entity = _context(preceding[-WORDS_BEFORE:], following)
        digits = carried + sum(found[n].digits for n in cluster)
        at_end = not re.search(r"\w", text[last.end :])
        looped = _loops([w for pos, w in words if pos >= last.end])
        situated += [
            _Situated(found[n], entity, digits, carried, at_end, first.start, looped)
            for n in cluster
        ]
    return situated


def _loops(words: list[str]) -> bool:
    """Whether ``words`` start with a phrase of up to :data:`LOOP_WORDS` words
    said :data:`LOOP_TIMES` times in a row: a decoder caught in a loop."""
    return any(
        len(words) >= size * LOOP_TIMES
        and all(words[k * size : (k + 1) * size] == words[:size] for k in range(LOOP_TIMES))
        for size in range(1, LOOP_WORDS + 1)
    )


def _context(preceding: list[str], following: list[str]) -> str | None:
    """The entity of the context word nearest to a run; specific words before
    ``number``, which counts only after "my", "your", ... ("my car number is",
    the engine's "card number"; not "the order number is")."""
    nearest: list[tuple[int, str]] = []
    for words, distances in (
        (preceding, range(len(preceding) - 1, -1, -1)),
        (following, range(len(following))),
    ):
        for n, (word, distance) in enumerate(zip(words, distances, strict=True)):
            entity = _ENTITY_OF.get(word)
            if entity == "NUMBER" and not _POSSESSIVE.intersection(words[max(0, n - 2) : n]):
                continue
            if entity is not None:
                nearest.append((distance, entity))
    specific = sorted(n for n in nearest if n[1] != "NUMBER")
    if specific:
        return specific[0][1]
    return "NUMBER" if nearest else None
