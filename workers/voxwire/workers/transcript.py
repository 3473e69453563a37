"""A session's transcript as wire messages, for files and live streams alike.
Pure: it calls nothing (no engine, no emit) and returns the messages it builds.

:class:`TranscriptBuilder` gives every message its ``seq`` (strictly
increasing from the first, :data:`voxwire.wire.records.FIRST_WORKER_SEQ` by
default), numbers the finals (``index`` counts finals, ``id`` is
``f"{sid}-{index}"``; a partial carries the id its final will have, so a
client replaces it), redacts their text (:mod:`voxwire.text.redaction`; what the last final
ended with goes into the next one's and its partials', so a number split over
two finals is redacted in both),
matches the standing prompts on each final (:mod:`voxwire.text.standing_prompts`:
a :class:`~voxwire_client.messages.MatchMessage` per prompt heard, right after
its final) and builds the progress, error and transcript messages.

Hallucinations. Whisper tends to write "Thank you.", "you", "Bye." or
"Thanks for watching!" for audio that holds no words. :meth:`TranscriptBuilder.heard`
drops a transcript that is, apart from case and punctuation, exactly one of
:data:`HALLUCINATIONS` when the segment's mean VAD probability (padding
included) is below :data:`HALLUCINATION_MAX_VAD` (0.35): Silero scores the
segments of real speech in the eval recordings 0.61 to 0.88 on average, so a
spoken "thank you" survives while a sound that barely passed the VAD does not.
Files have no VAD score: nothing of theirs is filtered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from voxwire.core.errors import ConfigError, VoxwireError
from voxwire.text.matching import Prompt
from voxwire.text.redaction import NO_TAIL, Redactor, redactor
from voxwire.text.standing_prompts import MAX_PROMPTS, StandingPrompts, prompt_of, spec_of
from voxwire.wire.records import FIRST_WORKER_SEQ
from voxwire.workers.engine import Segment, clean_text
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    ErrorMessage,
    LatencyData,
    MatchData,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    Task,
    TranscriptMessage,
    WordData,
)

HALLUCINATIONS = frozenset(
    {"you", "thank you", "thank you very much", "thanks for watching",
     "thank you for watching", "bye", "bye bye"}
)  # fmt: skip
"""Whole transcripts Whisper is known to invent on near-silence (lower case, no punctuation)."""

HALLUCINATION_MAX_VAD = 0.35
"""Below this mean VAD probability a segment's :data:`HALLUCINATIONS` text is dropped."""


def is_hallucination(text: str, vad_mean: float) -> bool:
    """Whether ``text`` is a stock Whisper invention on a segment that barely held speech."""
    if vad_mean >= HALLUCINATION_MAX_VAD:
        return False
    words = re.sub(r"[^\w\s']", " ", text.lower()).split()
    return " ".join(words) in HALLUCINATIONS


Words = tuple[WordData, ...]
"""A final's words, as the wire carries them."""


def words_of(segments: Iterable[Segment], offset_ms: int = 0) -> Words:
    """The engine's words of ``segments`` as a final carries them: times moved by
    ``offset_ms`` (where the engine's audio starts in the session's)."""
    return tuple(
        WordData(
            word=w.word,
            start_ms=offset_ms + w.start_ms,
            end_ms=offset_ms + w.end_ms,
            probability=round(w.probability, 4),
        )
        for s in segments
        for w in s.words
    )


def words_between(words: Words, start_ms: int, end_ms: int) -> Words:
    """The words of ``words`` whose middle lies in ``[start_ms, end_ms)``: those of
    one speaker's piece of a segment."""
    return tuple(w for w in words if start_ms <= (w.start_ms + w.end_ms) // 2 < end_ms)


def error_message(
    sid: str, seq: int, exc: VoxwireError, *, fatal: bool = True, version: int = 1
) -> ErrorMessage:
    """``exc`` as the error message ``seq`` of session ``sid``."""
    return ErrorMessage(
        sid=sid,
        seq=seq,
        code=exc.code,
        message=exc.message,
        hint=exc.hint,
        fatal=fatal,
        version=version,
    )


class TranscriptBuilder:
    """Seq, segments, redaction and prompt matching of one session."""

    def __init__(
        self,
        sid: str,
        *,
        language: str | None,
        model: str | None = None,
        redact: RedactMode = RedactMode.OFF,
        prompts: Sequence[PromptSpec | Prompt] = (),
        first_seq: int = FIRST_WORKER_SEQ,
        finals: Iterable[SegmentData] = (),
        task: Task = Task.TRANSCRIBE,
        version: int = 1,
    ) -> None:
        """``finals`` were committed before (a resumed stream): the numbering
        goes on after them and the prompts already matched them. ``version``:
        the transcript version every message carries (2 and up: a
        re-transcription, whose segment ids are ``{sid}-v{version}-{index}``).
        Raises :class:`ConfigError` for an unusable prompt."""
        if first_seq < 1:
            raise ValueError(f"first_seq must be at least 1, not {first_seq}")
        self.sid = sid
        self.language = language
        self.language_prob: float | None = None  # set when the language was detected
        self.model = model
        self.task = task  # on every segment: translate says the text is in English
        self._redact = redact
        try:
            self._matcher = StandingPrompts([prompt_of(p) for p in prompts])
        except ValueError as exc:  # a duplicate id, a prompt without words
            raise ConfigError(
                f"unusable prompts: {exc}", hint="fix the session's prompts", sid=sid
            ) from exc
        self.next_seq = first_seq
        self.version = version
        self.finals: list[SegmentData] = list(finals)
        # what the prompts matched before: their matches were emitted (or are pending)
        self._matcher.replay(
            (s.id, s.text, s.start_ms, s.end_ms, s.words, s.speaker) for s in self.finals
        )
        self._last_partial: tuple[int, str] | None = None  # (segment start, text)
        # what the last final ended with (its words, a number at its end): a card
        # number split over two finals is redacted in both
        self._tail = Redactor.tail(self.finals[-1].text) if self.finals else NO_TAIL

    @property
    def prompts(self) -> tuple[PromptSpec, ...]:
        """The standing prompts now."""
        return tuple(spec_of(p) for p in self._matcher.prompts)

    def change_prompts(self, add: Sequence[PromptSpec], remove: Sequence[str]) -> None:
        """Remove, then add, standing prompts: they apply from the next final on
        (with the finals before it, see :mod:`voxwire.text.standing_prompts`). All
        or nothing; a bad change raises ConfigError."""
        try:
            self._matcher.change([prompt_of(p) for p in add], remove, limit=MAX_PROMPTS)
        except ValueError as exc:
            raise ConfigError(
                f"prompts not changed: {exc}",
                hint="fix the prompts and send them again",
                sid=self.sid,
            ) from exc

    def detected(self, language: str, probability: float | None) -> None:
        """The session's language, as detected: on every segment from now on."""
        self.language, self.language_prob = language, probability

    def heard(self, segments: Iterable[Segment], vad_mean: float | None = None) -> str:
        """The engine's segments as one text; empty for a hallucination on
        weak speech (``vad_mean`` None: no VAD score, nothing filtered)."""
        text = " ".join(s.text.strip() for s in segments if s.text.strip())
        if vad_mean is not None and is_hallucination(text, vad_mean):
            return ""
        return text

    def partial(
        self, start_ms: int, end_ms: int, text: str, latency: LatencyData | None = None
    ) -> list[Message]:
        """The partial for the open segment: none when its (redacted) text is
        empty or the same as the last partial's of the segment."""
        text = self._redacted(text, partial=True)
        if not text or self._last_partial == (start_ms, text):
            return []
        self._last_partial = (start_ms, text)
        data = self._segment(start_ms, end_ms, text)
        return [
            SegmentMessage(
                sid=self.sid,
                seq=self._seq(),
                version=self.version,
                type="partial",
                segment=data,
                latency=latency,
            )
        ]

    def end_segment(self) -> None:
        """The open segment closed: the next partial belongs to another."""
        self._last_partial = None

    def final(
        self,
        start_ms: int,
        end_ms: int,
        text: str,
        latency: LatencyData | None = None,
        words: Sequence[WordData] = (),
        *,
        speaker: str | None = None,
        channel: int | None = None,
        continues: bool = False,
        flushed: bool = False,
    ) -> list[Message]:
        """Commit a final (with its ``words``, if any: :func:`words_of`; of
        ``speaker`` when diarized or of a separate ``channel``; ``continues`` the
        utterance of the final before; ``flushed``: the client's flush closed it):
        its message, then a match message per prompt heard."""
        self.end_segment()
        if self._redact is not RedactMode.OFF:
            redacted, words = redactor().redact_segment(
                text, words, self._redact, before=self._tail
            )
            self._tail = Redactor.tail(text, self._tail)
            text = redacted
        data = self._segment(start_ms, end_ms, text, speaker)
        data = data.model_copy(
            update={
                "words": tuple(words),
                "continues": continues,
                "channel": channel,
                "flushed": flushed,
            }
        )
        self.finals.append(data)
        final = SegmentMessage(
            sid=self.sid,
            seq=self._seq(),
            version=self.version,
            type="final",
            segment=data,
            latency=latency,
        )
        hits = self._matcher.on_final(
            data.id, data.text, data.start_ms, data.end_ms, data.words, data.speaker
        )
        return [final, *(self._match(hit) for hit in hits)]

    def stream_progress(
        self,
        status: SessionStatus,
        stream_ms: int,
        *,
        speech: bool,
        lag_ms: int,
        partials_skipped: int = 0,
    ) -> ProgressMessage:
        """A live stream's progress: no known length, so ``percent`` is 0 until completed."""
        return ProgressMessage(
            sid=self.sid,
            seq=self._seq(),
            version=self.version,
            status=status,
            percent=100.0 if status is SessionStatus.COMPLETED else 0.0,
            processed_ms=stream_ms,
            duration_ms=stream_ms,
            speech=speech,
            lag_ms=lag_ms,
            partials_skipped=partials_skipped,
        )

    def file_progress(
        self, status: SessionStatus, processed_ms: int, duration_ms: int
    ) -> ProgressMessage:
        """A file's progress: the share of its ``duration_ms`` processed."""
        percent = (
            100.0
            if status is SessionStatus.COMPLETED
            else (min(99.0, 100.0 * processed_ms / duration_ms) if duration_ms else 0.0)
        )
        return ProgressMessage(
            sid=self.sid,
            seq=self._seq(),
            version=self.version,
            status=status,
            percent=round(percent, 1),
            processed_ms=min(processed_ms, duration_ms),
            duration_ms=duration_ms,
        )

    def error(self, exc: VoxwireError, *, fatal: bool) -> ErrorMessage:
        return error_message(self.sid, self._seq(), exc, fatal=fatal, version=self.version)

    def transcript(self, duration_ms: int) -> TranscriptMessage:
        """The whole transcript: every final so far."""
        return TranscriptMessage(
            sid=self.sid,
            seq=self._seq(),
            version=self.version,
            text=" ".join(s.text for s in self.finals if s.text).strip(),
            language=self.language,
            language_prob=self.language_prob,
            duration_ms=duration_ms,
            segments=tuple(self.finals),
            model=self.model,
            task=self.task,
        )

    def _redacted(self, text: str, *, partial: bool = False) -> str:
        if self._redact is RedactMode.OFF:
            return text
        return redactor().redact(text, self._redact, partial=partial, before=self._tail)

    def _segment(
        self, start_ms: int, end_ms: int, text: str, speaker: str | None = None
    ) -> SegmentData:
        """A segment of the next final's index."""
        index = len(self.finals)
        again = f"v{self.version}-" if self.version > 1 else ""
        return SegmentData(
            id=f"{self.sid}-{again}{index}",
            index=index,
            start_ms=start_ms,
            end_ms=end_ms,
            text=text,
            language=self.language,
            language_prob=self.language_prob,
            speaker=speaker,
            model=self.model,
            task=self.task,
        )

    def _match(self, hit: MatchData) -> MatchMessage:
        return MatchMessage(sid=self.sid, seq=self._seq(), version=self.version, **hit.model_dump())

    def _seq(self) -> int:
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        return seq


def prompt_context(texts: Iterable[str], chars: int) -> str:
    """The last ``chars`` characters at most of ``texts`` joined, from a word's
    start, without markers (a redacted ``[CARD]``): a decoder's prompt."""
    joined = clean_text(" ".join(texts))
    if len(joined) <= chars:
        return joined
    tail = joined[-chars:]
    cut = tail.find(" ") if not joined[-chars - 1].isspace() else -1
    return tail[cut + 1 :].strip()
