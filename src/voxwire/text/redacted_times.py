"""When, in a session's audio, the words its redaction took out were said: the
spans that :mod:`voxwire.sessions.audio` silences.

Pure code, no I/O. The spans are read from the finals as they were delivered
(redacted, :mod:`voxwire.text.redaction`), so they are the same whoever reads
them: the file worker once a file is transcribed, the live worker that ends a
stream (with the finals of the workers before it, from its checkpoint). A
redacted word is one that a redaction left: its type (``[CREDIT_CARD]``) or
its masked letters (``****``). Where a final's text holds a redaction that no
word can be placed on (a final without words, or whose words were lost), the
whole final is taken: nothing said in it can be told apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from voxwire_client.messages import SegmentData

_ENTITY = re.compile(r"\[[A-Z][A-Z_]*\]")
"""A span replaced by its type: ``[CREDIT_CARD]``, ``[NUMBER]``."""
_MASKED = re.compile(r"\*+")
"""Masked letters and digits."""

Span = tuple[int, int]
"""Milliseconds ``[start, end)`` of the session's audio."""


def is_redacted(word: str) -> bool:
    """Whether ``word`` (a final's word) is what a redaction left."""
    return bool(_ENTITY.search(word)) or ("*" in word and not re.search(r"\w", word))


def redacted_spans(finals: Iterable[SegmentData]) -> tuple[Span, ...]:
    """The times of the redacted words of ``finals``, in order (see the module doc)."""
    spans: list[Span] = []
    for final in finals:
        if not (_ENTITY.search(final.text) or _MASKED.search(final.text)):
            continue
        placed = [(w.start_ms, w.end_ms) for w in final.words if is_redacted(w.word)]
        spans += placed or [(final.start_ms, final.end_ms)]
    return tuple(spans)
