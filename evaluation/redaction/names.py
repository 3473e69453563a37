"""People's names in the eval set (../shared/eval): which recordings say one, as
patterns that also match how an engine may spell them, and the scoring of a
names finder on any text of those recordings (the reference, an engine's
transcript). The other recordings with a reference say no name: whatever is
found in them is a false positive."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

NAMES: dict[str, tuple[str, ...]] = {
    "lhotse_ami_ES2011a_headset0_40-46s": (r"abigail", r"cla(?:f|ff)l[iy]n", r"ab+(?:ie|y|i)"),
    "pocketsphinx_librivox_0870": (r"john", r"dashwood"),
    "leopard_ls_1272-128104-0000": (r"quilter",),
}
"""Recording id -> a pattern per name word said in it (matched whole, case ignored)."""

Span = tuple[int, int]


Item = TypeVar("Item")
"""What identifies a text's words: a recording id, the patterns of what was said."""


@dataclass
class NameScore:
    name_words: int = 0
    """Name words of the texts (those the engine wrote, for a transcript)."""
    hidden: int = 0
    """Of them, those inside a finding."""
    findings: int = 0
    right: int = 0
    """Findings on a name word."""
    false_positives: list[str] = field(default_factory=list)
    """The text of each finding on no name word."""

    @property
    def recall(self) -> float:
        return self.hidden / self.name_words if self.name_words else 1.0

    @property
    def precision(self) -> float:
        return self.right / self.findings if self.findings else 1.0


def name_words(item_id: str, text: str) -> list[Span]:
    """Where ``text`` holds the name words said in recording ``item_id``."""
    return [
        (m.start(), m.end())
        for pattern in NAMES.get(item_id, ())
        for m in re.finditer(rf"\b{pattern}\b", text, re.IGNORECASE)
    ]


def score_names(texts: Sequence[tuple[str, str]], find: Callable[[str], list[Span]]) -> NameScore:
    """Recall over name words and precision over findings of ``find`` on
    ``texts`` (recording id, text)."""
    return score_spans(texts, name_words, find)


def score_spans(
    texts: Sequence[tuple[Item, str]],
    words_of: Callable[[Item, str], list[Span]],
    find: Callable[[str], list[Span]],
) -> NameScore:
    """Recall over the words ``words_of`` marks in each text, and precision over
    the findings of ``find`` on ``texts`` ((what identifies the text's words, text))."""
    score = NameScore()
    for item, text in texts:
        words = words_of(item, text)
        found = find(text)
        score.name_words += len(words)
        score.hidden += sum(any(s <= a and b <= e for s, e in found) for a, b in words)
        for s, e in found:
            score.findings += 1
            if any(a < e and s < b for a, b in words):
                score.right += 1
            else:
                score.false_positives.append(text[s:e])
    return score
