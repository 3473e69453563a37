"""Whether a transcript ends a sentence: the evidence for deciding a live final
early (the ``fast`` endpointing policy).

Whisper writes sentence-final punctuation where the speaker's sentence ends,
and usually a comma, an ellipsis or nothing where it goes on. It also closes
with a full stop any audio that simply stops, so punctuation alone would end
"I went to the." too: a text whose last word cannot end an English sentence
(an article, a conjunction, a preposition, a filler) is not finished, whatever
its punctuation. Other languages are judged by their punctuation alone.

Pure: no I/O, no state.
"""

from __future__ import annotations

import re

_CLOSERS = "\"')]}»”’"
"""Quotes and brackets that may follow a sentence's end mark."""

_END_MARKS = frozenset(".?!。？！")

_NEEDS_MORE = frozenset(
    {
        *("a", "an", "the", "my", "your", "his", "its", "our", "their"),
        *("and", "but", "or", "nor", "because", "if", "when", "while", "although", "though"),
        *("unless", "until", "than", "whether", "which", "whose"),
        *("to", "of", "by", "for", "with", "from", "into", "onto", "at"),
        *("i", "we", "they", "he", "she", "it's", "i'm", "i've", "we're", "you're", "they're"),
        *("um", "uh", "er", "erm", "very"),
    }
)
"""English words a statement does not end on (a question may: "Where to?")."""

_WORD = re.compile(r"[\w']+")


def sounds_finished(text: str, language: str | None = None) -> bool:
    """Whether ``text`` ends a sentence: it ends with ``.``, ``?`` or ``!`` (not
    an ellipsis), and, for an English statement (``language`` "en" or None), its
    last word is one a statement may end on."""
    tail = text.rstrip().rstrip(_CLOSERS).rstrip()
    if not tail or tail[-1] not in _END_MARKS or tail.endswith(("..", "…")):
        return False
    if language not in (None, "en") or tail[-1] != ".":
        return True
    words = _WORD.findall(tail.lower())
    return bool(words) and words[-1] not in _NEEDS_MORE
