"""Windows of committed text: the ``transcription.windows`` stream.

A session's audio is cut into fixed windows of ``length_ms``, one starting
every ``hop_ms`` (30 s every 15 s by default, so they overlap by half). A
window holds every final that overlaps it, whole. Whenever a final commits,
each window it falls in is sent again with its finals so far, keyed by the
session, and replaces the earlier version wherever it is kept (by ``sid`` and
``index``). A window with a single final is not sent: that final is already
indexed on its own.

The search index keeps the windows beside the segments, so that words said
across a segment boundary ("ask not" | "what your country") are found
(:mod:`voxwire.search.spans`): any two consecutive finals with less than
``length_ms - hop_ms`` of silence between them share a window. Standing
prompts match on a window of their own, the newest three finals, in the
worker (:mod:`voxwire.text.standing_prompts`): a match is due as soon as its last
word commits, not when a 30 s window is complete.

Pure code: the windows are a function of the session's finals, so a worker
that resumes a session sends the same windows again, and a rebuild of the
index computes them from the stored transcript (:func:`windows_of`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from voxwire_client.messages import SegmentData

LENGTH_MS = 30_000
HOP_MS = 15_000


class TextWindow(BaseModel):
    """Window ``index`` of a session: audio ``[start_ms, end_ms)`` and the
    finals that overlap it, in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sid: str
    index: int
    start_ms: int
    end_ms: int
    segments: tuple[SegmentData, ...]

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segments if s.text)

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


def windows_after(
    finals: Sequence[SegmentData],
    sid: str,
    *,
    length_ms: int = LENGTH_MS,
    hop_ms: int = HOP_MS,
) -> list[TextWindow]:
    """The windows that changed when ``finals[-1]`` committed (``finals`` in
    commit order, the newest last), each with every final it now holds."""
    if not finals:
        return []
    newest = finals[-1]
    first, last = _indexes(newest, length_ms, hop_ms)
    recent: list[SegmentData] = []
    start_of_first = first * hop_ms
    for final in reversed(finals):  # finals before the first window are not needed
        if _end(final) <= start_of_first:
            break
        recent.append(final)
    recent.reverse()
    return _windows(sid, recent, range(first, last + 1), length_ms, hop_ms)


def windows_of(
    finals: Sequence[SegmentData],
    sid: str,
    *,
    length_ms: int = LENGTH_MS,
    hop_ms: int = HOP_MS,
) -> list[TextWindow]:
    """Every window of a whole transcript, as the last :func:`windows_after` left them."""
    if not finals:
        return []
    last = max(_indexes(f, length_ms, hop_ms)[1] for f in finals)
    return _windows(sid, finals, range(last + 1), length_ms, hop_ms)


def _indexes(final: SegmentData, length_ms: int, hop_ms: int) -> tuple[int, int]:
    """The first and last window that ``final`` overlaps."""
    end = _end(final)
    first = max(0, (final.start_ms - length_ms) // hop_ms + 1)
    return first, (end - 1) // hop_ms


def _end(final: SegmentData) -> int:
    return max(final.end_ms, final.start_ms + 1)  # an empty span still sits somewhere


def _windows(
    sid: str, finals: Sequence[SegmentData], indexes: range, length_ms: int, hop_ms: int
) -> list[TextWindow]:
    found = []
    for index in indexes:
        start, end = index * hop_ms, index * hop_ms + length_ms
        inside = tuple(f for f in finals if f.start_ms < end and _end(f) > start)
        if len(inside) >= 2:
            found.append(
                TextWindow(sid=sid, index=index, start_ms=start, end_ms=end, segments=inside)
            )
    return found
