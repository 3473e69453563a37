"""The labelled redaction set (labelled.jsonl) and its scoring."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from voxwire.text.redaction import Finding

LABELLED = Path(__file__).with_name("labelled.jsonl")


@dataclass(frozen=True)
class Labelled:
    text: str
    expect: list[tuple[str, int, int]]
    """(entity, start, end) of every span that must be redacted."""


def labelled() -> list[Labelled]:
    found = []
    for line in LABELLED.read_text().splitlines():
        row = json.loads(line)
        text = row["text"]
        spans = []
        for entity, words in row["expect"]:
            start = text.index(words)
            spans.append((entity, start, start + len(words)))
        found.append(Labelled(text, spans))
    return found


@dataclass
class Score:
    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0

    @property
    def precision(self) -> float:
        found = self.true_positive + self.false_positive
        return self.true_positive / found if found else 1.0

    @property
    def recall(self) -> float:
        wanted = self.true_positive + self.false_negative
        return self.true_positive / wanted if wanted else 1.0


def score(expect: list[tuple[str, int, int]], found: list[Finding], into: Score) -> None:
    """A finding is right when it has the entity of an expected span and covers
    all of it (more is allowed: a few characters of punctuation)."""
    matched = set()
    for f in found:
        hit = next(
            (e for e in expect if e[0] == f.entity and f.start <= e[1] and f.end >= e[2]), None
        )
        if hit is None:
            into.false_positive += 1
        else:
            matched.add(hit)
            into.true_positive += 1
    into.false_negative += len(set(expect) - matched)


def scores(find: Callable[[str], list[Finding]]) -> tuple[dict[str, Score], Score]:
    """Precision and recall of ``find`` on the labelled set: per entity type, and in all."""
    by_entity: dict[str, Score] = {}
    total = Score()
    for item in labelled():
        found = find(item.text)
        score(item.expect, found, total)
        for entity in {e for e, _, _ in item.expect} | {f.entity for f in found}:
            score(
                [e for e in item.expect if e[0] == entity],
                [f for f in found if f.entity == entity],
                by_entity.setdefault(entity, Score()),
            )
    return by_entity, total
