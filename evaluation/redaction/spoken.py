"""The spoken set (spoken.jsonl, made by benchmarks/make_spoken_pii.py): personal
data said by espeak-ng voices and written by the real engine, and its scoring."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from voxwire.text.redaction import Finding

SPOKEN = Path(__file__).with_name("spoken.jsonl")


@dataclass(frozen=True)
class Spoken:
    text: str
    """What the engine wrote."""
    said: str
    entity: str | None
    span: tuple[int, int] | None
    """Where ``text`` holds what was said of the entity (None: nothing personal)."""
    secret: tuple[tuple[int, int], ...]
    """The character ranges of ``text`` that must not survive redaction."""


def spoken(path: Path = SPOKEN) -> list[Spoken]:
    found = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        span = tuple(row["span"]) if row["span"] else None
        secret = tuple((s, e) for s, e in row["secret"])
        found.append(Spoken(row["text"], row["said"], row["entity"], span, secret))  # type: ignore[arg-type]
    return found


def hidden(item: Spoken, found: list[Finding]) -> bool:
    """Whether every secret character of ``item`` lies in a finding."""
    return all(
        all(any(f.start <= c < f.end for f in found) for c in range(start, end))
        for start, end in item.secret
    )


@dataclass
class SpokenScore:
    items: int = 0
    hidden: int = 0
    findings: int = 0
    right: int = 0
    """Findings on personal data (of any type: a card number taken for an
    account number is still hidden)."""

    @property
    def recall(self) -> float:
        return self.hidden / self.items if self.items else 1.0

    @property
    def precision(self) -> float:
        return self.right / self.findings if self.findings else 1.0


def spoken_scores(
    find: Callable[[str], list[Finding]], path: Path = SPOKEN
) -> tuple[dict[str, SpokenScore], SpokenScore, list[Spoken]]:
    """Recall per entity said (items whose secret is all hidden), precision per
    entity found (findings that overlap what was said), in all; and the items missed."""
    by_entity: dict[str, SpokenScore] = {}
    total = SpokenScore()
    missed = []
    for item in spoken(path):
        found = [f for f in find(item.text) if f.entity != "NUMBER" or item.entity]
        if item.entity is not None and item.secret:
            score = by_entity.setdefault(item.entity, SpokenScore())
            for s in (score, total):
                s.items += 1
                s.hidden += hidden(item, found)
            if not hidden(item, found):
                missed.append(item)
        for f in found:
            right = item.span is not None and f.start < item.span[1] and f.end > item.span[0]
            for s in (by_entity.setdefault(f.entity, SpokenScore()), total):
                s.findings += 1
                s.right += right
    return by_entity, total, missed
