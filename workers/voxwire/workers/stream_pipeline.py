"""One live stream, from PCM chunks to the messages it publishes. No I/O here.

:class:`StreamSession` holds the state of one live session and, like
:func:`voxwire.workers.pipeline.run_file_job` for files, hands every message
to ``emit``. It reads no clock of its own: arrival times come with the audio
and the engine is timed with the ``now`` callable the caller injects (both on
one clock, in seconds, e.g. ``time.monotonic``).

Transcription must never hold up ingestion, so the work is split in two::

    ingestion thread                      engine thread
    ----------------                      -------------
    push(chunk_seq, pcm, received_at)     run_pending()   transcribe queued work,
      PCM16LE -> frames -> VAD ->                         emit messages in order
      Endpointer -> queue of work         finish()        transcript + completed
    end(received_at)  close the open segment

``push`` only runs the VAD (about 1 ms per 32 ms frame) and the endpointer,
and queues work items (:class:`PartialWork`, :class:`FinalWork`,
:class:`ProgressWork`) holding a copy of their audio and their times.
``run_pending`` takes them in order and emits:

- ``PartialDue`` -> a ``partial`` :class:`SegmentMessage`, unless its text is
  empty or unchanged. A partial still queued when a newer partial or the
  final of its segment is queued is dropped unseen (finals never are);
- ``FinalLikely`` -> a partial as for ``PartialDue``; its text is kept, and
  the final with the same bounds (due when the pause reaches
  ``min_silence_ms``, 400 ms later by default) is emitted with it at once
  instead of being transcribed again;
- ``SegmentFinal`` -> a ``final`` :class:`SegmentMessage` (``index`` counts
  finals, ``id`` is ``f"{sid}-{index}"``, times in stream ms, i.e. since the
  first sample of the stream), then a :class:`MatchMessage` per prompt heard.
  Partials carry the id their final will have, so a client replaces them.
  An empty transcript (silence, noise, markers only) gives no final;
- ``SpeechStarted`` / ``SpeechStopped`` -> a ``transcribing``
  :class:`ProgressMessage` (``percent`` 0: a stream has no known length;
  ``processed_ms`` = ``duration_ms`` = stream time), as does creation;
- ``Dropped`` -> nothing.

``seq`` is strictly increasing across everything the session emits, from
``first_seq``; the same chunks, engine output and ``run_pending`` calls give
the same ``seq`` values.

Chunks. ``chunk_seq`` counts from 0. A chunk already seen is ignored (a QoS 1
redelivery); one that skips ahead raises :class:`ChunkOrderError` and is not
consumed, so the session accepts the expected chunk next. A chunk with an odd
byte count raises :class:`~voxwire.core.errors.AudioError` and *is* consumed (its
audio dropped: redelivery cannot fix it), so stream time counts accepted audio
only. The caller turns these errors into messages with :meth:`StreamSession.error`.

Hallucinations. Whisper tends to write "Thank you.", "you", "Bye." or
"Thanks for watching!" for audio that holds no words. A transcript that is,
apart from case and punctuation, exactly one of :data:`HALLUCINATIONS` is
dropped when the segment's mean VAD probability (padding included) is below
:data:`HALLUCINATION_MAX_VAD` (0.35): Silero scores the segments of real
speech in the eval recordings 0.61 to 0.88 on average, so a spoken "thank you"
survives while a sound that barely passed the VAD does not. Partials get the
same filter.

Latency. Every segment message is a :class:`StreamSegmentMessage` whose
``latency`` (:class:`LatencyData`, excluded from the JSON until the contract
has the field) splits the time from the end of the segment's audio to the
message: ``vad_ms`` (the end of the audio arrived -> the endpointer decided;
for a final, mostly the ``min_silence_ms`` wait), ``queue_ms`` (decided ->
the engine started) and ``transcribe_ms``. Progress messages are
:class:`StreamProgressMessage` with ``speech`` and ``lag_ms`` likewise.

Threads. Call ``push`` and ``end`` from one thread, ``run_pending`` and
``finish`` from one thread (may be another); ``error`` and ``lag_ms`` from any.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from voxwire.core.audio import SAMPLE_RATE, Audio, pcm16le_to_float32
from voxwire.core.errors import AudioError, ConfigError, VoxwireError
from voxwire.core.matching import Match, Prompt
from voxwire.core.redaction import redactor
from voxwire.core.standing_prompts import MAX_PROMPTS, StandingPrompts, prompt_of, spec_of
from voxwire.workers.endpointing import (
    EndpointConfig,
    Endpointer,
    Event,
    FinalLikely,
    FinalReason,
    PartialDue,
    SegmentFinal,
    SpeechStarted,
    SpeechStopped,
)
from voxwire.workers.engine import Engine, EngineOptions, Segment, TranscriptionAborted
from voxwire.workers.pipeline import Emit
from voxwire.workers.stream_audio import FrameSplitter, SegmentBuffer
from voxwire.workers.vad import FRAME_SAMPLES, Vad
from voxwire_client.api import PromptSpec, RedactMode, StreamRequest
from voxwire_client.messages import (
    ErrorMessage,
    LatencyData,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)
from voxwire_client.topics import validate_sid

log = logging.getLogger(__name__)

_SAMPLES_PER_MS = SAMPLE_RATE // 1000
_LANGUAGE = re.compile(r"auto|[a-z]{2,3}")

HALLUCINATIONS = frozenset(
    {"you", "thank you", "thank you very much", "thanks for watching",
     "thank you for watching", "bye", "bye bye"}
)  # fmt: skip
"""Whole transcripts Whisper is known to invent on near-silence (lower case, no punctuation)."""

HALLUCINATION_MAX_VAD = 0.35
"""Below this mean VAD probability a segment's :data:`HALLUCINATIONS` text is dropped."""


class ChunkOrderError(AudioError):
    """A chunk arrived ahead of its turn (a gap in ``chunk_seq``)."""

    code = "chunk_order"


class StreamClosedError(AudioError):
    """Audio arrived after the stream ended or failed."""

    code = "stream_closed"


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """Per-session settings of a live stream. Override with ``dataclasses.replace``.

    Raises :class:`voxwire.core.errors.ConfigError` for values out of range."""

    language: str = "en"
    min_silence_ms: int = 600
    min_speech_ms: int = 250
    partial_interval_s: float = 2.0
    max_segment_s: float = 30.0
    vad_threshold: float = 0.5
    redact: RedactMode = RedactMode.OFF

    def __post_init__(self) -> None:
        if not isinstance(self.language, str) or not _LANGUAGE.fullmatch(self.language):
            raise ConfigError(
                f"stream setting language={self.language!r} must be a language code "
                "such as 'en', or 'auto'",
                hint="change language in the session configuration",
            )
        if not (math.isfinite(self.vad_threshold) and 0.0 < self.vad_threshold < 1.0):
            raise ConfigError(
                f"stream setting vad_threshold={self.vad_threshold!r} must lie between 0 and 1",
                hint="change vad_threshold in the session configuration",
            )
        self.endpointing  # noqa: B018 - validates the other settings

    @property
    def endpointing(self) -> EndpointConfig:
        """The endpointer's settings (raises :class:`ConfigError` when out of range)."""
        return EndpointConfig(
            threshold=self.vad_threshold,
            min_silence_ms=self.min_silence_ms,
            min_speech_ms=self.min_speech_ms,
            partial_interval_s=self.partial_interval_s,
            max_segment_s=self.max_segment_s,
        )


def stream_config(request: StreamRequest) -> StreamConfig:
    """The pipeline's settings for a stream as a client asked for it."""
    settings = request.model_dump(exclude={"prompts", "redact"})
    return StreamConfig(**settings, redact=request.redact or RedactMode.OFF)


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a stream stands after a message it emitted: what another worker
    needs to go on from there without repeating or losing a final (see
    :mod:`voxwire.workers.stream_worker`). The audio before the point is
    settled: finals cover it, or it held no words."""

    next_seq: int
    finals: tuple[SegmentData, ...] = ()
    chunk: int = 0
    """The first chunk holding audio that is not settled."""
    skip_samples: int = 0
    """Samples at the start of that chunk that are settled."""
    stream_sample: int = 0
    """The stream time of the point, in samples."""
    pending: tuple[Message, ...] = ()
    """Messages decided with the last one (a final's matches, the completion),
    seq already given: emitted first on resuming."""
    finished: bool = False
    """The transcript was emitted: nothing more but ``pending``."""
    prompts: tuple[PromptSpec, ...] | None = None
    """The standing prompts, when changed since the start (None: the start's)."""


# --- messages with stream metadata (excluded from the JSON until the contract has it) --------


# Stream messages are the contract's own; the names stay for readers of this module.
StreamSegmentMessage = SegmentMessage
StreamProgressMessage = ProgressMessage


# --- work items -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class _SliceWork:
    start_ms: int
    end_ms: int
    audio: Audio = field(repr=False)
    """A copy of the stream's samples in ``[start_ms, end_ms)``."""
    vad_mean: float
    """Mean VAD probability of the frames in the slice."""
    audio_end_at: float
    """When the chunk holding the slice's last sample arrived."""
    decided_at: float
    """When the chunk (or end of stream) that made the endpointer ask arrived."""


@dataclass(frozen=True, slots=True, eq=False)
class PartialWork(_SliceWork):
    """Transcribe the open segment so far; may be skipped for a newer one."""


@dataclass(frozen=True, slots=True, eq=False)
class LikelyFinalWork(PartialWork):
    """Transcribe the segment a pause may close (sent as a partial); the text
    serves the final at once when the final's bounds turn out the same."""


@dataclass(frozen=True, slots=True, eq=False)
class FinalWork(_SliceWork):
    """Transcribe and commit a segment; never skipped."""

    reason: FinalReason
    settled: tuple[int, int]
    """(chunk, samples of it) where the audio after the segment starts."""


@dataclass(frozen=True, slots=True)
class ReplayWork:
    """Emit messages decided before the stream was resumed here, as they are."""

    messages: tuple[Message, ...]
    decided_at: float


@dataclass(frozen=True, slots=True)
class ProgressWork:
    """Report the speech state at ``stream_ms``."""

    speech: bool
    stream_ms: int
    decided_at: float


Work = PartialWork | FinalWork | ProgressWork | ReplayWork


class StreamSession:
    """The state of one live stream: chunks in through :meth:`push`, messages out
    through ``emit`` from :meth:`run_pending` and :meth:`finish`."""

    def __init__(
        self,
        sid: str,
        engine: Engine,
        options: EngineOptions,
        config: StreamConfig,
        prompts: Sequence[PromptSpec | Prompt],
        emit: Emit,
        *,
        vad: Vad,
        now: Callable[[], float],
        first_seq: int = 2,
        resume: Resume | None = None,
        preempted: Callable[[], bool] | None = None,
        on_queued: Callable[[int], None] | None = None,
    ) -> None:
        """Raises ``InvalidSessionIdError`` (a ``ValueError``) for an unsafe ``sid``
        and :class:`ConfigError` for an unusable prompt.

        ``resume`` goes on from where another worker left the stream: chunks
        before ``resume.chunk`` are ignored as redeliveries, the settled start
        of that chunk is skipped, and seq, segment index and stream time carry on.

        A worker serving many sessions with one engine passes ``on_queued``
        (told the :meth:`next_rank` rank of each item queued) and ``preempted``
        (polled while a partial is transcribed: True drops the partial, so a
        final queued meanwhile need not wait for it).
        """
        if first_seq < 1:
            raise ValueError(f"first_seq must be at least 1, not {first_seq}")
        origin = resume.stream_sample if resume else 0
        self.sid = validate_sid(sid)
        self.config = config
        self._engine, self._emit, self._vad, self._now = engine, emit, vad, now
        self._preempted, self._on_queued = preempted, on_queued
        self.preempted_partials = 0
        self._options = replace(options, language=config.language)
        self._language = None if config.language == "auto" else config.language
        if resume is not None and resume.prompts is not None:
            prompts = resume.prompts
        self._prompts_changed = resume is not None and resume.prompts is not None
        try:
            self._matcher = StandingPrompts([prompt_of(p) for p in prompts])
        except ValueError as exc:  # a duplicate id, a prompt without words
            raise ConfigError(
                f"unusable prompts: {exc}", hint="fix the session's prompts", sid=sid
            ) from exc
        # ingestion side (push/end)
        self._endpointer = Endpointer(config.endpointing, start_ms=origin // _SAMPLES_PER_MS)
        self._splitter = FrameSplitter(FRAME_SAMPLES, start_sample=origin)
        self._buffer = SegmentBuffer(max_seconds=2 * config.max_segment_s + 10, start_sample=origin)
        self._tail: Audio = np.empty(0, dtype=np.float32)  # samples not yet in a frame
        self._samples = origin  # stream time at the end of the accepted audio, in samples
        self._arrivals: deque[_Arrival] = deque()
        self._probabilities: deque[tuple[int, float]] = deque()  # (frame start ms, probability)
        self._next_chunk = resume.chunk if resume else 0
        self._skip = resume.skip_samples if resume else 0  # settled samples of the next chunk
        self._ended = False
        # shared: the queue (guarded by _lock), seq and emit (guarded by _emit_lock)
        self._lock = threading.Lock()
        self._queue: deque[Work] = deque()
        self._in_flight: Work | None = None
        self._closed = False  # a fatal error was emitted
        self.skipped_partials = 0
        self._emit_lock = threading.Lock()
        self._seq = resume.next_seq if resume else first_seq
        # engine side (run_pending/finish)
        self._finals: list[SegmentData] = list(resume.finals) if resume else []
        # what the prompts matched before: their matches were emitted (or are pending)
        self._matcher.replay((s.id, s.text, s.start_ms, s.end_ms) for s in self._finals)
        self._settled = (self._next_chunk, self._skip, origin)  # (chunk, skip, stream sample)
        self._pending: tuple[Message, ...] = ()  # decided with the message being emitted
        self._last_partial: tuple[int, str] | None = None  # (segment start, text)
        self._likely: tuple[int, int, str] | None = None  # a likely final's (start, end, text)
        self._finished = False
        if resume is None:
            self._enqueue(ProgressWork(speech=False, stream_ms=0, decided_at=now()))
        else:
            self._ended = self._finished = resume.finished
            if resume.pending:
                self._enqueue(ReplayWork(resume.pending, now()))

    def resume_point(self) -> Resume:
        """Where the stream stands after the last message emitted (engine side:
        call it from ``emit``, or with no emission running)."""
        chunk, skip, sample = self._settled
        prompts = None
        if self._prompts_changed:
            prompts = tuple(spec_of(p) for p in self._matcher.prompts)
        return Resume(
            self._seq,
            tuple(self._finals),
            chunk,
            skip,
            sample,
            self._pending,
            self._finished,
            prompts,
        )

    @property
    def next_chunk(self) -> int:
        """The number of the next chunk expected."""
        return self._next_chunk

    def change_prompts(self, add: Sequence[PromptSpec], remove: Sequence[str]) -> None:
        """Remove, then add, standing prompts: they apply from the next final on
        (with the finals before it, see :mod:`voxwire.core.standing_prompts`). All
        or nothing; a bad change raises ConfigError."""
        try:
            prompts = [prompt_of(p) for p in add]
            with self._emit_lock:  # finals are matched under this lock
                self._matcher.change(prompts, remove, limit=MAX_PROMPTS)
                self._prompts_changed = True
        except ValueError as exc:
            raise ConfigError(
                f"prompts not changed: {exc}",
                hint="fix the prompts and send them again",
                sid=self.sid,
            ) from exc

    @property
    def finished(self) -> bool:
        """The transcript was emitted (here or, for a resumed stream, before)."""
        return self._finished

    # --- ingestion ------------------------------------------------------------------------------

    def push(self, chunk_seq: int, pcm: bytes, received_at: float) -> None:
        """Take chunk ``chunk_seq`` (PCM16LE, 16 kHz mono) that arrived at
        ``received_at``. Ignores a chunk already seen; raises
        :class:`ChunkOrderError` for one out of turn, :class:`AudioError` for
        an odd byte count and :class:`StreamClosedError` after :meth:`end`."""
        if 0 <= chunk_seq < self._next_chunk:
            return  # a redelivery
        if self._ended or self._closed:
            state = "failed" if self._closed else "ended"
            raise StreamClosedError(
                f"chunk {chunk_seq} arrived after the stream {state}",
                hint="start a new session to stream more audio",
                sid=self.sid,
            )
        if chunk_seq != self._next_chunk:
            raise ChunkOrderError(
                f"chunk {chunk_seq} arrived out of order: the stream expects chunk "
                f"{self._next_chunk} next",
                hint="send chunks in order, numbered consecutively from 0",
                sid=self.sid,
            )
        self._next_chunk += 1  # consumed even if refused below: redelivery cannot fix it
        try:
            samples = pcm16le_to_float32(pcm)
        except AudioError as exc:
            exc.sid = self.sid
            raise
        if self._skip:  # settled before this stream was resumed here
            samples, self._skip = samples[self._skip :], 0
        if samples.size == 0:
            return
        first = self._samples
        self._samples += samples.size
        self._arrivals.append(_Arrival(chunk_seq, first, self._samples, received_at))
        for start_ms, frame in self._splitter.push(samples):
            self._buffer.append(frame)
            probability = self._vad.speech_probability(frame)
            self._probabilities.append((start_ms, probability))
            self._handle(self._endpointer.push(start_ms, probability), received_at)
            self._forget_old()
        self._keep_tail(samples)

    def end(self, received_at: float) -> None:
        """End of stream (signalled at ``received_at``): close the open segment.
        Its final is queued; call :meth:`run_pending` and then :meth:`finish`.
        A second call does nothing."""
        if self._ended:
            return
        self._ended = True
        if self._tail.size:  # the last samples, too few for a VAD frame, belong to the segment
            self._buffer.append(self._tail)
            self._tail = np.empty(0, dtype=np.float32)
        self._handle(self._endpointer.end_of_stream(self._buffer.end_ms), received_at)

    @property
    def buffered_ms(self) -> int:
        """Stream audio held for open and coming segments."""
        return (self._buffer.held_samples + self._tail.size) // _SAMPLES_PER_MS

    @property
    def stream_ms(self) -> int:
        """Stream time at the end of the audio accepted so far."""
        return self._samples // _SAMPLES_PER_MS

    def lag_ms(self) -> int:
        """How far the engine is behind: the age (by the injected clock) of the
        oldest work queued or being transcribed; 0 when it is idle."""
        with self._lock:
            oldest = self._in_flight or (self._queue[0] if self._queue else None)
        return 0 if oldest is None else _ms(self._now() - oldest.decided_at)

    def _handle(self, events: list[Event], decided_at: float) -> None:
        for event in events:
            if isinstance(event, SpeechStarted | SpeechStopped):
                speech = isinstance(event, SpeechStarted)
                self._enqueue(ProgressWork(speech, self._endpointer.now_ms, decided_at))
            elif isinstance(event, PartialDue | FinalLikely | SegmentFinal):
                self._enqueue(self._slice(event, decided_at))
            # Dropped: a sound too short to be speech, nothing to do

    def _slice(
        self, event: PartialDue | FinalLikely | SegmentFinal, decided_at: float
    ) -> PartialWork | FinalWork:
        start, end = event.start_ms, event.end_ms
        audio = self._buffer.slice(start, end)
        probabilities = [p for s, p in self._probabilities if start <= s < end]
        vad_mean = float(np.mean(probabilities)) if probabilities else 0.0
        end_sample = end * _SAMPLES_PER_MS
        arrived = next((a.received_at for a in self._arrivals if a.end >= end_sample), decided_at)
        if isinstance(event, PartialDue):
            return PartialWork(start, end, audio, vad_mean, arrived, decided_at)
        if isinstance(event, FinalLikely):
            return LikelyFinalWork(start, end, audio, vad_mean, arrived, decided_at)
        after = next((a for a in self._arrivals if a.end > end_sample), None)
        settled = (after.chunk, end_sample - after.start) if after else (self._next_chunk, 0)
        return FinalWork(start, end, audio, vad_mean, arrived, decided_at, event.reason, settled)

    def _forget_old(self) -> None:
        """Drop what no later event can reach back to: memory stays bounded."""
        keep_ms = self._endpointer.retain_from_ms
        self._buffer.discard_before(keep_ms)
        while self._probabilities and self._probabilities[0][0] < keep_ms:
            self._probabilities.popleft()
        while len(self._arrivals) > 1 and self._arrivals[0].end < keep_ms * _SAMPLES_PER_MS:
            self._arrivals.popleft()

    def _keep_tail(self, samples: Audio) -> None:
        """Remember the samples the splitter holds back (for the end of the stream)."""
        pending = self._splitter.pending_samples
        joined = samples if pending <= samples.size else np.concatenate([self._tail, samples])
        self._tail = joined[joined.size - pending :].copy()

    def _enqueue(self, work: Work) -> None:
        with self._lock:
            if self._closed:
                return
            if isinstance(
                work, PartialWork | FinalWork
            ):  # supersedes queued partials of its segment
                start = work.start_ms
                stale = [
                    w for w in self._queue if isinstance(w, PartialWork) and w.start_ms == start
                ]
                for old in stale:
                    self._queue.remove(old)
                self.skipped_partials += len(stale)
            self._queue.append(work)
        if self._on_queued is not None:
            self._on_queued(_RANK[type(work)])

    # --- engine side ----------------------------------------------------------------------------

    def run_pending(self) -> int:
        """Transcribe the queued work in order and emit its messages, until the
        queue is empty (work queued meanwhile included). Returns how many items
        were done. An engine error costs one segment (a non-fatal error
        message); an unexpected exception ends the session (a fatal one)."""
        done = 0
        while self.run_next():
            done += 1
        return done

    def next_rank(self) -> tuple[int, float] | None:
        """How urgent the next queued item is, for a worker that serves many
        sessions with one engine: lower first (progress, then finals, likely
        finals, partials; older first); None when nothing is queued."""
        with self._lock:
            work = self._queue[0] if self._queue else None
        return None if work is None else (_RANK[type(work)], work.decided_at)

    def run_next(self) -> bool:
        """Run the next queued item (as :meth:`run_pending`); False when none."""
        with self._lock:
            if not self._queue:
                return False
            work = self._in_flight = self._queue.popleft()
        try:
            self._run(work)
        finally:
            with self._lock:
                self._in_flight = None
        return True

    def take_final(self) -> tuple[FinalWork, float] | None:
        """Pop the next item when it is a final the engine must transcribe, for a
        worker that transcribes the finals of several sessions in one engine
        call; hand the result to :meth:`complete_final` with the start time
        returned. None otherwise (the item stays queued for :meth:`run_next`)."""
        with self._lock:
            work = self._queue[0] if self._queue else None
            if type(work) is not FinalWork or self._likely_text(work) is not None:
                return None
            self._in_flight = self._queue.popleft()
        return work, self._now()

    def complete_final(
        self, work: FinalWork, outcome: list[Segment] | VoxwireError, started: float
    ) -> None:
        """Commit a final taken with :meth:`take_final`: its segments, or the
        engine's error (which costs this segment, as in :meth:`run_next`)."""
        try:
            if isinstance(outcome, VoxwireError):
                outcome.sid = outcome.sid or self.sid
                self.error(outcome)
            else:
                self._transcribed(work, outcome, started)
        finally:
            with self._lock:
                self._in_flight = None

    @property
    def options(self) -> EngineOptions:
        return self._options

    def _likely_text(self, work: Work) -> str | None:
        """The text of the likely final with this final's bounds, if one was transcribed."""
        likely = self._likely
        if isinstance(work, FinalWork) and likely and likely[:2] == (work.start_ms, work.end_ms):
            return likely[2]
        return None

    def finish(self) -> None:
        """After :meth:`end`: run what is left, then emit the transcript and the
        ``completed`` progress (nothing after a fatal error). Once only."""
        if not self._ended:
            raise RuntimeError("finish() must come after end()")
        if self._finished:
            return
        self.run_pending()
        if self._closed:
            self._finished = True
            return
        duration = self.stream_ms
        with self._emit_lock:
            transcript = TranscriptMessage(
                sid=self.sid,
                seq=self._next_seq(),
                text=" ".join(s.text for s in self._finals),
                language=self._language,
                duration_ms=duration,
                segments=tuple(self._finals),
            )
            completed = self._progress_message(SessionStatus.COMPLETED, duration, speech=False)
            self._finished = True
            self._settled = (self._next_chunk, 0, self._samples)  # no audio comes after end()
            self._emit_all([transcript, completed])

    def error(self, exc: VoxwireError, *, fatal: bool = False) -> None:
        """Emit ``exc`` as an error message (from any thread). A fatal error
        closes the session: queued work is dropped and nothing more is emitted."""
        with self._emit_lock:
            if self._closed:
                return
            self._emit(
                ErrorMessage(
                    sid=self.sid,
                    seq=self._next_seq(),
                    code=exc.code,
                    message=exc.message,
                    hint=exc.hint,
                    fatal=fatal,
                )
            )
            if fatal:
                with self._lock:
                    self._closed = True
                    self._queue.clear()

    def _emit_all(self, messages: list[Message]) -> None:
        """Emit messages decided together (seqs given); hold ``_emit_lock``. A
        resume point taken meanwhile lists those still to come as pending."""
        for i, message in enumerate(messages):
            self._pending = tuple(messages[i + 1 :])
            self._emit(message)
        self._pending = ()

    def _run(self, work: Work) -> None:
        if isinstance(work, ReplayWork):
            with self._emit_lock:
                self._emit_all(list(work.messages))
            return
        if isinstance(work, ProgressWork):
            with self._emit_lock:
                status = SessionStatus.TRANSCRIBING
                self._emit(self._progress_message(status, work.stream_ms, speech=work.speech))
            return
        started = self._now()
        likely = self._likely_text(work)
        if isinstance(work, FinalWork) and likely is not None:
            latency = LatencyData(
                vad_ms=_ms(work.decided_at - work.audio_end_at),
                queue_ms=_ms(started - work.decided_at),
                transcribe_ms=0,  # done while the pause went on
            )
            self._final(work, likely, latency)
            return
        abort = self._preempted if isinstance(work, PartialWork) else None
        try:
            segments = self._engine.transcribe(work.audio, self._options, abort=abort)
        except TranscriptionAborted:
            self.preempted_partials += 1
            return
        except VoxwireError as exc:
            exc.sid = exc.sid or self.sid
            self.error(exc)
            return
        except Exception as exc:  # a bug, not bad input: the session still gets its ending
            log.exception("stream %s failed inside the engine", self.sid)
            name = type(exc).__name__
            self.error(
                VoxwireError(f"transcription failed: {name}", hint="retry later"), fatal=True
            )
            return
        self._transcribed(work, segments, started)

    def _transcribed(
        self, work: PartialWork | FinalWork, segments: list[Segment], started: float
    ) -> None:
        latency = LatencyData(
            vad_ms=_ms(work.decided_at - work.audio_end_at),
            queue_ms=_ms(started - work.decided_at),
            transcribe_ms=_ms(self._now() - started),
        )
        text = " ".join(s.text.strip() for s in segments if s.text.strip())
        if is_hallucination(text, work.vad_mean):
            text = ""
        if isinstance(work, LikelyFinalWork):
            self._likely = (work.start_ms, work.end_ms, text)
        if isinstance(work, PartialWork):
            self._partial(work, text, latency)
        else:
            self._final(work, text, latency)

    def _partial(self, work: PartialWork, text: str, latency: LatencyData) -> None:
        text = self._redact(text, partial=True)
        if not text or self._last_partial == (work.start_ms, text):
            return
        self._last_partial = (work.start_ms, text)
        with self._emit_lock:
            data = self._segment_data(work, text)
            self._emit(
                StreamSegmentMessage(
                    sid=self.sid,
                    seq=self._next_seq(),
                    type="partial",
                    segment=data,
                    latency=latency,
                )
            )

    def _final(self, work: FinalWork, text: str, latency: LatencyData) -> None:
        self._last_partial = self._likely = None
        with self._emit_lock:
            self._settled = (*work.settled, work.end_ms * _SAMPLES_PER_MS)
            if not text:
                return
            data = self._segment_data(work, self._redact(text))
            self._finals.append(data)  # before emitting: the resume point includes it
            final = StreamSegmentMessage(
                sid=self.sid, seq=self._next_seq(), type="final", segment=data, latency=latency
            )
            hits = self._matcher.on_final(data.id, data.text, data.start_ms, data.end_ms)
            matches = [_match_message(self.sid, self._next_seq(), hit) for hit in hits]
            self._emit_all([final, *matches])

    def _redact(self, text: str, *, partial: bool = False) -> str:
        if self.config.redact is RedactMode.OFF:
            return text
        return redactor().redact(text, self.config.redact, partial=partial)

    def _segment_data(self, work: _SliceWork, text: str) -> SegmentData:
        """A segment of the next final's index (a partial carries the index its
        final will have, so a client replaces it)."""
        index = len(self._finals)
        return SegmentData(
            id=f"{self.sid}-{index}",
            index=index,
            start_ms=work.start_ms,
            end_ms=work.end_ms,
            text=text,
            language=self._language,
        )

    def _progress_message(
        self, status: SessionStatus, stream_ms: int, *, speech: bool
    ) -> StreamProgressMessage:
        return StreamProgressMessage(
            sid=self.sid,
            seq=self._next_seq(),
            status=status,
            percent=100.0 if status is SessionStatus.COMPLETED else 0.0,
            processed_ms=stream_ms,
            duration_ms=stream_ms,
            speech=speech,
            lag_ms=self.lag_ms(),
        )

    def _next_seq(self) -> int:
        """The next seq; call with ``_emit_lock`` held."""
        seq, self._seq = self._seq, self._seq + 1
        return seq


_RANK: dict[type, int] = {
    ReplayWork: 0, ProgressWork: 0, FinalWork: 1, LikelyFinalWork: 2, PartialWork: 3,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Arrival:
    """An accepted chunk: its number, its samples' place in the stream, its arrival."""

    chunk: int
    start: int
    end: int
    received_at: float


def is_hallucination(text: str, vad_mean: float) -> bool:
    """Whether ``text`` is a stock Whisper invention on a segment that barely held speech."""
    if vad_mean >= HALLUCINATION_MAX_VAD:
        return False
    words = re.sub(r"[^\w\s']", " ", text.lower()).split()
    return " ".join(words) in HALLUCINATIONS


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _match_message(sid: str, seq: int, hit: Match) -> MatchMessage:
    return MatchMessage(sid=sid, seq=seq, **asdict(hit))  # the same fields, by design
