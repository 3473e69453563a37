"""Hits that span segments, found through the windows (:mod:`voxwire.wire.windows`).

A query is answered first by single segments. Both backends also search the
windows of committed text, and a window that answers the query is turned into
the shortest runs of its consecutive segments that answer it together where
none of them does alone: "ask not what" said as "ask not" | "what your
country" gives one hit over both segments. Runs within a single segment are
left to the segment search, so nothing is reported twice; the same run found
in two overlapping windows is reported once.

Words are taken from the window's joined text, so a number said across the
boundary ("twenty" | "five") is the one number 25, belonging to both segments.
A run answers a query when every word has its stem (or, fuzzy, a stem within
its fuzzy distance) in the run and every phrase's stems appear in order,
one after the other, as the backends' phrase queries require.

:func:`page_of` merges both kinds of hits by score into one page.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from voxwire.search.query import (
    ParsedQuery,
    SearchHit,
    SearchPage,
    SearchQuery,
    answers,
    highlight,
    stem,
)
from voxwire.text.normalization import normalize
from voxwire_client.messages import SegmentData


@dataclass(frozen=True, slots=True)
class _Word:
    stem: str
    first: int  # the segments (indexes into the window) the word's characters fall in
    last: int


def spans_across(
    segments: Sequence[SegmentData], parsed: ParsedQuery, *, fuzzy: bool = False
) -> list[tuple[int, int]]:
    """The shortest runs ``(i, j)``, ``i < j``, of ``segments`` that answer the
    query together and hold no shorter run that does (on its own or together)."""
    words = _words(segments)
    found: list[tuple[int, int]] = []
    for length in range(1, len(segments) + 1):
        for i in range(len(segments) - length + 1):
            j = i + length - 1
            if any(a >= i and b <= j for a, b in found):
                continue  # holds a shorter answer
            stems = [w.stem for w in words if w.first >= i and w.last <= j]
            if _answers(stems, parsed, fuzzy):
                found.append((i, j))
    return [(i, j) for i, j in found if j > i]


def _words(segments: Sequence[SegmentData]) -> list[_Word]:
    starts: list[int] = []
    parts: list[str] = []
    pos = 0
    for segment in segments:
        starts.append(pos)
        parts.append(segment.text)
        pos += len(segment.text) + 1
    text = " ".join(parts)

    def owner(char: int) -> int:
        return bisect.bisect_right(starts, char) - 1

    return [
        _Word(stem(t.text), owner(t.start), owner(max(t.end - 1, t.start))) for t in normalize(text)
    ]


def _answers(stems: Sequence[str], parsed: ParsedQuery, fuzzy: bool) -> bool:
    present = set(stems)
    for word in parsed.words:
        if not any(answers(s, {stem(word)}, fuzzy) for s in present):
            return False
    for phrase in parsed.phrases:
        wanted = [stem(w) for w in phrase]
        n = len(wanted)
        if not any(stems[k : k + n] == wanted for k in range(len(stems) - n + 1)):
            return False
    return True


def window_hits(
    sid: str,
    segments: Sequence[SegmentData],
    score: float,
    parsed: ParsedQuery,
    query: SearchQuery,
) -> list[SearchHit]:
    """The hits a window that answers the query gives (see :func:`spans_across`),
    within the query's time window. With a ``speaker`` filter only that
    speaker's segments of the window count, one after the other: what others
    said between them is skipped."""
    if query.speaker is not None:
        segments = [s for s in segments if s.speaker == query.speaker]
    hits = []
    for i, j in spans_across(segments, parsed, fuzzy=query.fuzzy):
        run = segments[i : j + 1]
        start_ms, end_ms = run[0].start_ms, run[-1].end_ms
        if query.start_ms is not None and end_ms <= query.start_ms:
            continue
        if query.end_ms is not None and start_ms >= query.end_ms:
            continue
        hits.append(
            SearchHit(
                sid=sid,
                segment_id=run[0].id,
                index=run[0].index,
                start_ms=start_ms,
                end_ms=end_ms,
                text=" ".join(s.text for s in run),
                highlight="",
                score=score,
                segment_ids=tuple(s.id for s in run),
                speaker=speaker_of(run),
            )
        )
    return hits


def speaker_of(segments: Sequence[SegmentData]) -> str | None:
    """The speaker of ``segments`` when they all have the same one, else None."""
    speakers = {s.speaker for s in segments}
    return speakers.pop() if len(speakers) == 1 else None


def speakers_of(segments: Sequence[SegmentData]) -> list[str]:
    """The distinct speakers of ``segments``, in order of appearance (a window's,
    indexed so that a speaker filter can skip windows without them)."""
    return list(dict.fromkeys(s.speaker for s in segments if s.speaker is not None))


def page_of(
    segment_hits: Iterable[SearchHit],
    spanning_hits: Iterable[SearchHit],
    query: SearchQuery,
    parsed: ParsedQuery,
) -> SearchPage:
    """One page of both kinds of hits, best first, highlighted; ``segment_hits``
    and ``spanning_hits`` each hold the best ``offset + size + 1`` of their kind."""
    hits = list(segment_hits)
    seen = set()
    for hit in spanning_hits:
        key = (hit.sid, hit.segment_ids)
        if key not in seen:
            seen.add(key)
            hits.append(hit)
    hits.sort(key=lambda h: (-h.score, h.sid, h.index, len(h.segment_ids)))
    end = query.offset + query.size
    page = tuple(
        h.model_copy(update={"highlight": highlight(h.text, parsed, fuzzy=query.fuzzy)})
        for h in hits[query.offset : end]
    )
    return SearchPage(hits=page, offset=query.offset, size=query.size, more=len(hits) > end)


def spans_possible(parsed: ParsedQuery) -> bool:
    """Whether the query could span segments at all (it has two words or more)."""
    return len(parsed.all_words) >= 2
