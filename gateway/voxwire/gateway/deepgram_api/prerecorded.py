"""A voxwire transcript as Deepgram's pre-recorded response. Pure: a
:class:`~voxwire_client.api.TranscriptResponse` in, a
:class:`~voxwire.gateway.deepgram_api.shapes.FileResponse` out.

``results.channels`` has one entry, or one per channel when the file's channels
were transcribed apart (``multichannel=true``), each with one alternative: the
transcript (as written with ``punctuate``/``smart_format``, else lower case
without punctuation), the mean of its words' probabilities as ``confidence``,
its words. ``utterances`` (with ``utterances=true``) are voxwire's segments:
each is what a pause ended. ``paragraphs`` (with ``paragraphs=true``) group the
segments of one speaker that follow each other within :data:`PARAGRAPH_GAP_MS`,
their sentences split at sentence-final punctuation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from voxwire.gateway.deepgram_api.live import (
    MODEL_VERSION,
    confidence,
    deepgram_word,
    plain,
    speaker_number,
)
from voxwire.gateway.deepgram_api.params import Listening
from voxwire.gateway.deepgram_api.shapes import (
    FileAlternative,
    FileChannel,
    FileMetadata,
    FileResponse,
    FileResults,
    ModelInfo,
    Paragraph,
    Paragraphs,
    Sentence,
    Utterance,
    model_uuid,
)
from voxwire_client.api import TranscriptResponse
from voxwire_client.messages import SegmentData

PARAGRAPH_GAP_MS = 2_000
"""A pause this long between one speaker's segments starts a new paragraph."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def file_response(
    transcript: TranscriptResponse,
    listening: Listening,
    *,
    model: str,
    sha256: str,
    created: datetime | None = None,
) -> FileResponse:
    """The pre-recorded response for ``transcript`` (``model``: the served name)."""
    segments = [s for s in transcript.segments if s.text.strip()]
    model = next((s.model for s in segments if s.model), model)
    numbers: list[int | None] = [None]
    if channelled := sorted({s.channel for s in segments if s.channel is not None}):
        numbers = list(channelled)
    channels = [
        _channel([s for s in segments if s.channel == n], listening, transcript.language)
        for n in numbers
    ]
    utterances = [_utterance(s, listening) for s in segments] if listening.utterances else None
    uuid = model_uuid(model)
    metadata = FileMetadata(
        request_id=transcript.sid,
        sha256=sha256,
        created=(created or datetime.now(UTC)).isoformat(),
        duration=round(transcript.duration_ms / 1000, 3),
        channels=len(channels),
        models=[uuid],
        model_info={uuid: ModelInfo(name=model, version=MODEL_VERSION)},
    )
    return FileResponse(
        metadata=metadata, results=FileResults(channels=channels, utterances=utterances)
    )


def _channel(
    segments: Sequence[SegmentData], listening: Listening, language: str | None
) -> FileChannel:
    text = " ".join(s.text.strip() for s in segments)
    words = [w for s in segments for w in s.words if w.word.strip()]
    alternative = FileAlternative(
        transcript=text if listening.punctuate else plain(text),
        confidence=confidence(tuple(words)),
        words=[deepgram_word(w, s.speaker) for s in segments for w in s.words if w.word.strip()],
        paragraphs=paragraphs(segments) if listening.paragraphs else None,
    )
    return FileChannel(alternatives=[alternative], detected_language=language)


def _utterance(segment: SegmentData, listening: Listening) -> Utterance:
    text = segment.text.strip()
    return Utterance(
        id=segment.id,
        start=round(segment.start_ms / 1000, 3),
        end=round(segment.end_ms / 1000, 3),
        confidence=confidence(segment.words),
        channel=(segment.channel or 1) - 1,
        transcript=text if listening.punctuate else plain(text),
        words=[deepgram_word(w, segment.speaker) for w in segment.words if w.word.strip()],
        speaker=speaker_number(segment.speaker),
    )


def paragraphs(segments: Sequence[SegmentData]) -> Paragraphs:
    """The segments as paragraphs of sentences (see the module docstring)."""
    groups: list[list[SegmentData]] = []
    for segment in segments:
        last = groups[-1][-1] if groups else None
        if (
            last is None
            or last.speaker != segment.speaker
            or segment.start_ms - last.end_ms >= PARAGRAPH_GAP_MS
        ):
            groups.append([])
        groups[-1].append(segment)
    out = [_paragraph(group) for group in groups]
    lines = []
    for paragraph in out:
        text = " ".join(s.text for s in paragraph.sentences)
        who = f"Speaker {paragraph.speaker}: " if paragraph.speaker is not None else ""
        lines.append(f"\n{who}{text}")
    return Paragraphs(transcript="\n".join(lines), paragraphs=out)


def _paragraph(group: list[SegmentData]) -> Paragraph:
    sentences = [s for segment in group for s in sentences_of(segment)]
    return Paragraph(
        sentences=sentences,
        num_words=sum(len(s.text.split()) for s in sentences),
        start=round(group[0].start_ms / 1000, 3),
        end=round(group[-1].end_ms / 1000, 3),
        speaker=speaker_number(group[0].speaker),
    )


def sentences_of(segment: SegmentData) -> list[Sentence]:
    """The segment's sentences, timed by its words where it has them (their count
    per sentence), else by the segment."""
    texts = [t for t in _SENTENCE_END.split(segment.text.strip()) if t]
    words = [w for w in segment.words if w.word.strip()]
    out, used = [], 0
    for text in texts:
        count = len(text.split())
        mine = words[used : used + count]
        used += count
        start = mine[0].start_ms if mine else segment.start_ms
        end = mine[-1].end_ms if mine else segment.end_ms
        out.append(Sentence(text=text, start=round(start / 1000, 3), end=round(end / 1000, 3)))
    return out
