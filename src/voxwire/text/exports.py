"""A transcript as a file: plain text, SubRip (SRT) or WebVTT subtitles.

Pure code, no I/O: segments in, text out.

- ``txt``: a line per segment, ``S1: `` before it when the segment has a speaker;
  a segment that ``continues`` the utterance before (a live early final's
  continuation, same speaker) goes on that line.
- ``srt``: numbered cues, ``00:00:01,200 --> 00:00:03,900``, the speaker as a
  ``S1: `` prefix on the cue's first line (SRT has no voice markup).
- ``vtt``: ``WEBVTT``, then cues ``00:00:01.200 --> 00:00:03.900`` with the
  speaker as a voice span (``<v S1>``); ``&``, ``<`` and ``>`` are escaped.

Subtitle cues are cut from each segment (never across segments, so a cue has
one speaker): its words fill lines of at most :data:`MAX_LINE` characters
(a longer word stands alone), :data:`MAX_LINES` lines to a cue. A cue starts
when its first word starts and ends when its last word ends, from the
segment's word times where it has them, else from the share of the segment's
characters before it. The words are the segment's text split at spaces, so the
cues hold exactly the transcript's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from voxwire.core.errors import InvalidRequestError
from voxwire.text.words import span_times
from voxwire_client.api import TranscriptFormat
from voxwire_client.messages import SegmentData

MAX_LINE = 42
"""Characters per subtitle line (the usual broadcast limit)."""
MAX_LINES = 2
"""Lines per cue."""

CONTENT_TYPES = {
    TranscriptFormat.JSON: "application/json",
    TranscriptFormat.TXT: "text/plain; charset=utf-8",
    TranscriptFormat.SRT: "application/x-subrip; charset=utf-8",
    TranscriptFormat.VTT: "text/vtt; charset=utf-8",
}


TEXT_FORMATS = (TranscriptFormat.TXT, TranscriptFormat.SRT, TranscriptFormat.VTT)


def transcript_format(name: str) -> TranscriptFormat:
    """The format called ``name``; :class:`InvalidRequestError` listing the
    formats for any other."""
    try:
        return TranscriptFormat(name.lower())
    except ValueError:
        known = ", ".join(f.value for f in TranscriptFormat)
        raise InvalidRequestError(
            f"unknown transcript format {name[:20]!r} (formats: {known})",
            hint=f"ask for one of: {known}",
        ) from None


@dataclass(frozen=True, slots=True)
class Cue:
    """A subtitle: its lines of text, when to show it, and who speaks."""

    start_ms: int
    end_ms: int
    lines: tuple[str, ...]
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    start_ms: int
    end_ms: int


def render(segments: Sequence[SegmentData], fmt: TranscriptFormat) -> str:
    """The segments as text in ``fmt`` (``txt``, ``srt`` or ``vtt``)."""
    if fmt is TranscriptFormat.TXT:
        return to_txt(segments)
    if fmt is TranscriptFormat.SRT:
        return to_srt(segments)
    if fmt is TranscriptFormat.VTT:
        return to_vtt(segments)
    raise ValueError(f"{fmt} is not a text format")


def to_txt(segments: Sequence[SegmentData]) -> str:
    lines: list[str] = []
    speaker: str | None = None
    for segment in segments:
        text = segment.text.strip()
        if not text:
            continue
        if lines and segment.continues and segment.speaker == speaker:
            lines[-1] += f" {text}"
        else:
            lines.append(_label(segment.speaker, ": ") + text)
        speaker = segment.speaker
    return "".join(f"{line}\n" for line in lines)


def to_srt(segments: Sequence[SegmentData]) -> str:
    blocks = []
    for n, cue in enumerate(cues(segments), start=1):
        lines = list(cue.lines)
        lines[0] = _label(cue.speaker, ": ") + lines[0]
        times = f"{_clock(cue.start_ms, ',')} --> {_clock(cue.end_ms, ',')}"
        blocks.append(f"{n}\n{times}\n" + "\n".join(lines) + "\n")
    return "\n".join(blocks)


def to_vtt(segments: Sequence[SegmentData]) -> str:
    blocks = ["WEBVTT\n"]
    for cue in cues(segments):
        lines = [_escape(line) for line in cue.lines]
        if cue.speaker:
            lines[0] = f"<v {_escape(cue.speaker)}>{lines[0]}"
        times = f"{_clock(cue.start_ms, '.')} --> {_clock(cue.end_ms, '.')}"
        blocks.append(f"{times}\n" + "\n".join(lines) + "\n")
    return "\n".join(blocks)


def cues(
    segments: Sequence[SegmentData], *, max_line: int = MAX_LINE, max_lines: int = MAX_LINES
) -> list[Cue]:
    """The segments cut into subtitle cues, in order."""
    out: list[Cue] = []
    for segment in segments:
        tokens = _tokens(segment)
        label = len(_label(segment.speaker, ": "))  # the SRT prefix takes room on line 1
        lines: list[list[_Token]] = [[]]
        for token in tokens:
            room = max_line - (label if len(lines) == 1 else 0)
            line = lines[-1]
            if line and len(" ".join(t.text for t in [*line, token])) > room:
                if len(lines) == max_lines:
                    out.append(_cue(lines, segment.speaker))
                    lines = [[]]
                else:
                    lines.append([])
            lines[-1].append(token)
        if lines[0]:
            out.append(_cue(lines, segment.speaker))
    return out


def _cue(lines: list[list[_Token]], speaker: str | None) -> Cue:
    tokens = [t for line in lines for t in line]
    text = tuple(" ".join(t.text for t in line) for line in lines if line)
    return Cue(tokens[0].start_ms, max(tokens[-1].end_ms, tokens[0].start_ms), text, speaker)


def _tokens(segment: SegmentData) -> list[_Token]:
    """The segment's text split at spaces, each piece timed by its words or,
    without word times, by its share of the segment's characters."""
    text = segment.text
    pieces: list[tuple[int, int]] = []
    pos = 0
    for piece in text.split():
        at = text.index(piece, pos)
        pieces.append((at, at + len(piece)))
        pos = at + len(piece)
    if not pieces:
        return []
    lo, hi = pieces[0][0], pieces[-1][1]
    span = max(0, segment.end_ms - segment.start_ms)

    def share(pos: int) -> int:
        return segment.start_ms + round(span * (pos - lo) / max(1, hi - lo))

    tokens = []
    floor = segment.start_ms
    for start, end in pieces:
        timed = span_times(text, segment.words, start, end) if segment.words else None
        begin, finish = timed if timed is not None else (share(start), share(end))
        begin = max(begin, floor)
        finish = min(max(finish, begin), max(segment.end_ms, begin))
        tokens.append(_Token(text[start:end], begin, finish))
        floor = begin
    return tokens


def _label(speaker: str | None, after: str) -> str:
    return f"{speaker}{after}" if speaker else ""


def _clock(ms: int, comma: str) -> str:
    ms = max(0, ms)
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{comma}{millis:03d}"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
