"""Transcript exports: what a subtitle library reads back from our SRT and
WebVTT is the transcript, cut into short cues in time order, with speakers."""

from __future__ import annotations

import html
import io
import re

import pytest
import srt
import webvtt

from voxwire.core.errors import InvalidRequestError
from voxwire.text.exports import MAX_LINE, MAX_LINES, cues, render, to_srt, to_txt, to_vtt
from voxwire.text.exports import transcript_format as format_named
from voxwire_client.api import TranscriptFormat
from voxwire_client.messages import SegmentData, WordData

JFK_WORDS = [
    ("And", 0, 740), ("so", 740, 1060), ("my", 1060, 1460), ("fellow", 1460, 1760),
    ("Americans", 1760, 2260), ("ask", 2260, 3880), ("not", 3880, 4520),
    ("what", 4520, 5700), ("your", 5700, 6040), ("country", 6040, 6360),
    ("can", 6360, 6760), ("do", 6760, 7020), ("for", 7020, 7260), ("you,", 7260, 8060),
    ("ask", 8060, 8660), ("what", 8660, 8940), ("you", 8940, 9280), ("can", 9280, 9500),
    ("do", 9500, 9720), ("for", 9720, 9920), ("your", 9920, 10220), ("country.", 10220, 10520),
]  # fmt: skip
JFK_TEXT = " ".join(w for w, _a, _b in JFK_WORDS)


def _segment(index: int, start: int, end: int, text: str, **extra: object) -> SegmentData:
    return SegmentData(id=f"s-{index}", index=index, start_ms=start, end_ms=end, text=text, **extra)  # type: ignore[arg-type]


def _words(triples: list[tuple[str, int, int]]) -> tuple[WordData, ...]:
    return tuple(WordData(word=w, start_ms=a, end_ms=b, probability=0.9) for w, a, b in triples)


SEGMENTS = [
    _segment(0, 0, 10520, JFK_TEXT, speaker="S1", words=_words(JFK_WORDS)),
    _segment(1, 11000, 13000, "Tom & Jerry <3 said: a < b", speaker="S2"),
    _segment(2, 13000, 14000, "said without a speaker", speaker=None),
]
TRANSCRIPT = " ".join(s.text for s in SEGMENTS)


def _words_of(text: str) -> list[str]:
    return text.split()


def test_srt_parses_and_holds_the_transcript_with_speaker_prefixes() -> None:
    subs = list(srt.parse(to_srt(SEGMENTS)))
    assert [s.index for s in subs] == list(range(1, len(subs) + 1))
    assert len(subs) > len(SEGMENTS), "the long segment is cut into several cues"
    said = " ".join(s.content.replace("\n", " ") for s in subs)
    assert _words_of(re.sub(r"(^| )S[12]: ", r"\1", said)) == _words_of(TRANSCRIPT)
    assert subs[0].content.startswith("S1: And so")
    assert [s.content.startswith("S2: ") for s in subs].count(True) >= 1
    assert subs[-2].content == "S2: Tom & Jerry <3 said: a < b"
    assert subs[-1].content == "said without a speaker"  # no speaker, no prefix
    for sub in subs:
        lines = sub.content.split("\n")
        assert len(lines) <= MAX_LINES and all(len(line) <= MAX_LINE for line in lines), lines
    starts = [s.start.total_seconds() for s in subs]
    assert starts == sorted(starts)
    assert all(s.start <= s.end for s in subs)


def test_webvtt_parses_with_voices_and_escaped_text() -> None:
    captions = webvtt.from_buffer(io.StringIO(to_vtt(SEGMENTS)))
    assert len(captions) > len(SEGMENTS)
    voices = [c.voice for c in captions]
    assert voices[0] == "S1" and "S2" in voices and voices[-1] is None
    said = html.unescape(" ".join(c.text.replace("\n", " ") for c in captions))
    assert _words_of(said) == _words_of(TRANSCRIPT)  # cue text escapes & < > as HTML does
    assert "&amp;" in captions[-2].raw_text and "&lt;3" in captions[-2].raw_text
    for caption in captions:
        assert len(caption.lines) <= MAX_LINES
        assert all(len(line) <= MAX_LINE for line in caption.text.split("\n"))
    starts = [c.start_in_seconds for c in captions]
    assert starts == sorted(starts)


def test_cues_take_their_times_from_the_words() -> None:
    first = cues(SEGMENTS[:1])
    assert len(first) == 2
    said = len(" ".join(first[0].lines).split())  # words in the first cue
    assert (first[0].start_ms, first[0].end_ms) == (0, JFK_WORDS[said - 1][2])
    assert (first[1].start_ms, first[1].end_ms) == (JFK_WORDS[said][1], 10520)
    # without words: the share of the characters, inside the segment
    (only,) = cues([_segment(0, 1000, 3000, "one two three four")])
    assert (only.start_ms, only.end_ms) == (1000, 3000)
    half = cues([_segment(0, 0, 10_000, " ".join(["word"] * 40))])
    assert len(half) == 3 and 0 < half[1].start_ms < half[2].start_ms < 10_000


def test_txt_is_a_line_per_segment_with_speakers() -> None:
    assert to_txt(SEGMENTS).splitlines() == [
        f"S1: {JFK_TEXT}",
        "S2: Tom & Jerry <3 said: a < b",
        "said without a speaker",
    ]
    assert render([], TranscriptFormat.SRT) == "" and to_vtt([]) == "WEBVTT\n"


def test_txt_joins_a_live_final_that_continues_the_one_before() -> None:
    segments = [
        _segment(0, 0, 2000, "It was late.", speaker="S1"),
        _segment(1, 2000, 3000, "And dark.", speaker="S1", continues=True),
        _segment(2, 3000, 4000, "Yes.", speaker="S2", continues=True),  # another voice
        _segment(3, 5000, 6000, "Next one."),
    ]
    assert to_txt(segments).splitlines() == [
        "S1: It was late. And dark.",
        "S2: Yes.",
        "Next one.",
    ]
    # subtitles keep each final's own cue, timed by it
    assert [c.lines for c in cues(segments)] == [
        ("It was late.",),
        ("And dark.",),
        ("Yes.",),
        ("Next one.",),
    ]


def test_a_word_longer_than_a_line_stands_alone() -> None:
    long = "x" * 60
    assert [c.lines for c in cues([_segment(0, 0, 1000, f"a {long} b")])] == [("a", long), ("b",)]


def test_format_names() -> None:
    assert format_named("SRT") is TranscriptFormat.SRT
    with pytest.raises(InvalidRequestError, match="json, txt, srt, vtt"):
        format_named("docx")
