"""Calls made of the spoken set's sentences (:mod:`.said`), for measuring redaction
where users meet it (benchmarks/bench_redaction_paths.py): several sentences in a
row with pauses between them, some numbers said in answer to a question said
before them, and the scoring of what a user receives of a call (its redacted
text) against what was said in it.

A call's text is aligned with everything said in it at once: each item's personal
data lies between the last recognised word of what was said before it (its own
words, the question it answers, the sentences before) and the first of what was
said after. Of that span, what must not survive is what :func:`.said.secret`
names (a number's digits and number words, the words of anything else), read
outside the redaction markers (``[CREDIT_CARD]``). An item is hidden when nothing
of it survives; an item whose span holds neither a marker nor a secret was not
written by the engine and is not counted (it is lost). A marker is right when it
lies on the span of an item."""

from __future__ import annotations

import bisect
import random
import re
from dataclasses import dataclass, field

from evaluation.redaction.said import (
    ADDRESSES,
    CARDS,
    EMAILS,
    PHONES,
    SPEEDS,
    SSNS,
    VOICES,
    Item,
    Take,
    digits,
    gaps,
    pairs,
    secret,
    takes,
)
from evaluation.redaction.spoken import SpokenScore

PROMPTED: tuple[tuple[str, Item], ...] = (
    (
        "can you confirm the card number on the account?",
        Item("CREDIT_CARD", "yes, it is", CARDS[0], ""),
    ),
    (
        "could you read me the card number, please?",
        Item("CREDIT_CARD", "sure", pairs(CARDS[2]), ""),
    ),
    ("what is your social security number?", Item("US_SSN", "it is", digits(SSNS[0]), "")),
    (
        "what is the best number to reach you on?",
        Item("PHONE_NUMBER", "", digits(PHONES[1], "oh"), ""),
    ),
    ("which account should the refund go to?", Item("ACCOUNT_NUMBER", "", digits("1234 5678"), "")),
    ("what email should the receipt go to?", Item("EMAIL_ADDRESS", "", EMAILS[1], "")),
    ("and where should we deliver it?", Item("STREET_ADDRESS", "", ADDRESSES[2], "")),
)
"""A question, then personal data in answer to it, said as a sentence of its own:
what the question says is context the answer's sentence does not hold."""

MARKER = re.compile(r"\[[A-Z][A-Z_]*\]")
_TOKEN = re.compile(rf"{MARKER.pattern}|[\w']+")


@dataclass(frozen=True)
class Turn:
    """An item said in a call, after the question it answers (a prompted item)."""

    take: Take
    question: Take | None = None

    def sentences(self) -> list[Take]:
        return [t for t in (self.question, self.take) if t is not None]


def turns(spoken: list[Item]) -> list[Turn]:
    """Every take of ``spoken`` (as :func:`.said.takes` says them), then every take
    of the :data:`PROMPTED` answers after their question, which another voice
    asks at the middle speed."""
    questions = {item: question for question, item in PROMPTED}
    found = [Turn(take) for take in takes(spoken)]
    for take in takes([item for _, item in PROMPTED]):
        voice = VOICES[(VOICES.index(take.voice) + 1) % len(VOICES)]
        asked = Take(Item(None, questions[take.item], "", ""), voice, SPEEDS[1])
        found.append(Turn(take, asked))
    return found


@dataclass(frozen=True)
class Call:
    turns: tuple[Turn, ...]
    pauses_s: tuple[float, ...]
    """The silence after each sentence but the last."""

    def sentences(self) -> list[Take]:
        return [take for turn in self.turns for take in turn.sentences()]


def calls(
    said: list[Turn], rng: random.Random, size: int = 5, pause_s: tuple[float, float] = (0.5, 1.5)
) -> list[Call]:
    """``said`` in an order drawn by ``rng``, ``size`` turns a call, with pauses
    between sentences drawn uniformly from ``pause_s``."""
    order = list(said)
    rng.shuffle(order)
    found = []
    for start in range(0, len(order), size):
        group = tuple(order[start : start + size])
        count = sum(len(turn.sentences()) for turn in group)
        pauses = tuple(round(rng.uniform(*pause_s), 2) for _ in range(count - 1))
        found.append(Call(group, pauses))
    return found


def _words(text: str) -> list[str]:
    return [m.group().lower() for m in _TOKEN.finditer(text)]


@dataclass(frozen=True)
class Placed:
    """Where a call's text holds one turn's item, and what of it survived."""

    turn: Turn
    span: tuple[int, int] | None
    """The text's words between what was said before the item and after it."""
    left: tuple[tuple[int, int], ...]
    """The secret characters of the span outside a marker: what leaked."""
    marked: bool
    """A marker lies on the span."""
    question_end: int | None
    """Where the last recognised word of the question the item answers ends."""

    @property
    def entity(self) -> str | None:
        return self.turn.take.item.entity

    @property
    def counted(self) -> bool:
        return self.entity is not None and bool(self.left or self.marked)


def place(call: Call, text: str) -> tuple[list[Placed], list[tuple[str, int, int]]]:
    """Each turn of ``call`` placed in ``text`` (what a user received of it), and
    the markers of ``text``: (entity, start, end)."""
    heard = [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    said: list[str | None] = []
    for turn in call.turns:
        if turn.question is not None:
            said += [*_words(turn.question.item.sentence), None]
        item = turn.take.item
        said += [*_words(item.before), *([None] if item.said else []), *_words(item.after)]
    ranges = iter(gaps(said, [w for w, _, _ in heard]))
    markers = [(m.group()[1:-1], m.start(), m.end()) for m in MARKER.finditer(text)]
    plain = MARKER.sub(lambda m: " " * len(m.group()), text)
    placed = []
    for turn in call.turns:
        question_end = span = None
        if turn.question is not None:
            first, _ = next(ranges)
            question_end = heard[first - 1][2] if first > 0 else None
        item = turn.take.item
        if item.said:
            first, last = next(ranges)
            span = (heard[first][1], heard[last - 1][2]) if first < last else None
        left = secret(plain, span, str(item.entity)) if span else []
        marked = span is not None and any(s < span[1] and e > span[0] for _, s, e in markers)
        placed.append(Placed(turn, span, tuple(left), marked, question_end))
    return placed, markers


def apart(placed: Placed, finals: list[str]) -> bool | None:
    """Whether the item's answer began in a later final than its question's last
    word, in the text of ``finals`` joined by spaces (None: not a located answer)."""
    if placed.question_end is None or placed.span is None:
        return None
    starts = [0]
    for final in finals[:-1]:
        starts.append(starts[-1] + len(final) + 1)
    return bisect.bisect_right(starts, placed.question_end - 1) < bisect.bisect_right(
        starts, placed.span[0]
    )


@dataclass
class PathScore:
    """Redaction of one path (file or live) over every call."""

    by_entity: dict[str, SpokenScore] = field(default_factory=dict)
    total: SpokenScore = field(default_factory=SpokenScore)
    prompted: SpokenScore = field(default_factory=SpokenScore)
    """Of the total, the answers to a question."""
    lost: int = 0
    """Items the engine did not write (no marker, no secret where they were said)."""
    unplaced: list[str] = field(default_factory=list)
    """The text of each item that shares its span with another (the engine lost
    the words between them): it cannot be told whose it is."""
    apart: int = 0
    """Answers that began in a final of their own, after their question's."""
    missed: list[tuple[Placed, str]] = field(default_factory=list)
    """Each item not hidden, with the text it had."""
    wrong: list[str] = field(default_factory=list)
    """Each marker off personal data, with the words around it."""

    def add(self, call: Call, text: str, finals: list[str] | None = None) -> None:
        """Score ``text``, a user's text of ``call``; ``finals``: its finals, whose
        joined text is ``text``, to count the answers in a final of their own."""
        placed, markers = place(call, text)
        spans = [p.span for p in placed if p.span is not None]
        for p in placed:
            if p.entity is None:
                continue
            if p.span is not None and sum(_overlap(p.span, s) for s in spans) > 1:
                self.unplaced.append(text[p.span[0] : p.span[1]])
                continue
            if p.span is None or not p.counted:
                self.lost += 1
                continue
            hidden = not p.left
            scores = [self.by_entity.setdefault(p.entity, SpokenScore()), self.total]
            for s in scores + ([self.prompted] if p.turn.question else []):
                s.items += 1
                s.hidden += hidden
            if not hidden:
                self.missed.append((p, text[p.span[0] : p.span[1]]))
            self.apart += bool(finals is not None and apart(p, finals))
        for entity, start, end in markers:
            right = any(_overlap((start, end), span) for span in spans)
            for s in (self.by_entity.setdefault(entity, SpokenScore()), self.total):
                s.findings += 1
                s.right += right
            if not right:
                self.wrong.append(text[max(0, start - 40) : end + 40])


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and a[1] > b[0]
