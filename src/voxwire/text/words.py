"""The words of a segment against its text: where each one is, what redaction
leaves of them, and the times of a span of the text.

Pure code, no I/O. A segment's ``words`` come from the engine and its text is
the engine's text as written (possibly redacted): each word is looked up in
the text, in order, so that a span of characters (a redaction finding, a
prompt match) maps onto the words it covers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from voxwire_client.messages import WordData

Span = tuple[int, int]
"""Characters ``[start, end)`` of a text."""


@dataclass(frozen=True, slots=True)
class Replacement:
    """Characters ``[start, end)`` of a text replaced: ``text`` is what stands
    there now, or None where every letter and digit became ``*``."""

    start: int
    end: int
    text: str | None


def locate(text: str, words: Sequence[WordData]) -> list[Span | None]:
    """Where each word is in ``text``, looked up in order after the word before;
    None for a word the text does not hold there."""
    spans: list[Span | None] = []
    pos = 0
    for word in words:
        at = text.find(word.word, pos) if word.word else -1
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, at + len(word.word)))
        pos = at + len(word.word)
    return spans


def _masked(word: str) -> str:
    return re.sub(r"\w", "*", word)


def redact_words(
    text: str, words: Sequence[WordData], replaced: Sequence[Replacement]
) -> tuple[WordData, ...]:
    """``words`` of the original ``text`` once ``replaced`` spans were redacted:
    a word inside a masked span is masked; the words of a span replaced by its
    type become one word, that type, from the first one's start to the last
    one's end. A word that cannot be found in the text is masked whenever
    anything was redacted, so no original word survives by accident."""
    if not replaced:
        return tuple(words)
    spans = locate(text, words)
    out: list[WordData] = []
    done: set[int] = set()  # replacements already standing in the words
    for word, span in zip(words, spans, strict=True):
        hit = None if span is None else _overlapping(span, replaced)
        if span is not None and hit is None:
            out.append(word)
        elif hit is None or replaced[hit].text is None:
            out.append(word.model_copy(update={"word": _masked(word.word)}))
        elif hit in done:
            out[-1] = out[-1].model_copy(
                update={
                    "end_ms": max(out[-1].end_ms, word.end_ms),
                    "probability": min(out[-1].probability, word.probability),
                }
            )
        else:
            done.add(hit)
            out.append(word.model_copy(update={"word": replaced[hit].text}))
    return tuple(out)


def _overlapping(span: Span, replaced: Sequence[Replacement]) -> int | None:
    for i, r in enumerate(replaced):
        if span[0] < r.end and r.start < span[1]:
            return i
    return None


def span_times(
    text: str, words: Sequence[WordData], first: int, last: int
) -> tuple[int, int] | None:
    """The start of the first word and the end of the last word that characters
    ``[first, last)`` of ``text`` touch; None when no word can be placed there."""
    touched = [
        word
        for word, span in zip(words, locate(text, words), strict=True)
        if span is not None and span[0] < last and first < span[1]
    ]
    if not touched:
        return None
    return touched[0].start_ms, touched[-1].end_ms
