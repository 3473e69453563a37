"""One live stream between its intake and the engine: a queue of work, and
the one path that turns the engine's output into the stream's messages.

:class:`StreamSession` joins the stream's :class:`~voxwire.workers.stream.intake.StreamIntake` (PCM
chunks -> work items) and :class:`~voxwire.workers.transcript.TranscriptBuilder` (text ->
messages). It never calls the engine: a :class:`~voxwire.workers.stream.scheduler.Scheduler` takes
its work (:meth:`StreamSession.take`, :meth:`StreamSession.take_final`), runs the engine where
:meth:`StreamSession.needs_engine` says so, and hands what it made of the item
(:class:`Decoded`) to :meth:`StreamSession.commit`. It sends nothing: committing an item (and
:meth:`StreamSession.finish`, :meth:`StreamSession.error`) returns the messages decided and the
resume point after them (:class:`Outbound`), and the caller saves the checkpoint and sends them
(a worker's :class:`~voxwire.workers.stream.outbox.Outbox`). It reads no clock of its own:
arrival times come with the audio, and the ``now`` callable the caller injects (on the same
clock, in seconds, e.g. ``time.monotonic``) times the queue.

What each item becomes:

- :class:`~voxwire.workers.stream.intake.PartialWork` -> a ``partial``
  :class:`~voxwire_client.messages.SegmentMessage`, unless its text is empty
  or unchanged. A partial still queued when a newer partial or the final of
  its segment is queued is dropped unseen (finals never are);
- :class:`~voxwire.workers.stream.intake.LikelyFinalWork` -> a partial as for
  ``PartialWork``; its text is kept, and the final with the same bounds (due
  when the pause reaches ``min_silence_ms``, 400 ms later by default) is
  committed with it at once instead of being transcribed again;
- :class:`~voxwire.workers.stream.intake.FinalWork` -> a ``final`` (``flushed`` when
  the client's flush closed it: :meth:`StreamSession.flush`; its words on the
  stream's timeline; its speaker when diarized: :mod:`voxwire.workers.speakers.live`)
  and a match per prompt heard; an empty transcript (silence, noise, markers, a
  hallucination) gives none;
- :class:`~voxwire.workers.stream.intake.ProgressWork` -> a ``transcribing``
  progress message (``speech`` and ``lag_ms`` set), as does creation;
- :class:`ReplayWork` -> the messages decided before the stream was resumed here.

``seq`` is strictly increasing across everything the session returns, in the
order it returns it, from ``first_seq``; the same chunks, engine output and
order of work give the same ``seq`` values. An engine error costs one segment
(a non-fatal error message); an unexpected exception ends the session (a fatal
one).

Latency. Every segment message carries :class:`~voxwire_client.messages.LatencyData`,
from the end of the segment's audio to the message: ``vad_ms`` (the end of the audio
arrived -> the endpointer decided; for a final, mostly the ``min_silence_ms``
wait), ``queue_ms`` (decided -> the engine started) and ``transcribe_ms``.

Early finals. Under the ``fast`` endpointing policy, a likely final whose text ends a
sentence (:func:`voxwire.text.turns.sounds_finished`) closes its segment at once if the
pause goes on (:meth:`StreamIntake.close_early
<voxwire.workers.stream.intake.StreamIntake.close_early>`): its final is queued in place
of the partial and served by the likely final's text, about 400 ms before the
``min_silence_ms`` wait would have decided it. A final of speech that resumed within
that wait is marked ``continues``.

Threads. Call everything from one thread (a worker's event loop: ingestion and
committing, since committing a likely final may close its segment), except
:meth:`~StreamSession.speakers_of`, for an engine's thread while it holds a final,
and :meth:`~StreamSession.lag_ms`, from any. The queue has its own lock; nothing else
is shared, and nothing waits on I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from voxwire.audio.codecs import ChunkDecoder
from voxwire.audio.libopus import OpusLibrary
from voxwire.core.errors import AudioError, ConfigError, VoxwireError
from voxwire.core.metrics import STREAM_FINALS, STREAM_LAG, STREAM_PARTIALS
from voxwire.text.matching import Prompt
from voxwire.text.standing_prompts import check_speakers
from voxwire.text.turns import sounds_finished
from voxwire.wire.records import FIRST_WORKER_SEQ
from voxwire.workers.channels import TrackFinal
from voxwire.workers.engine import EngineOptions, Segment, TranscriptionAborted
from voxwire.workers.speakers.live import StreamSpeakers
from voxwire.workers.stream.config import UNTUNED, LiveTuning
from voxwire.workers.stream.config import StreamConfig as StreamConfig
from voxwire.workers.stream.config import stream_config as stream_config
from voxwire.workers.stream.intake import (
    SAMPLES_PER_MS,
    FinalWork,
    LikelyFinalWork,
    PartialWork,
    ProgressWork,
    SliceWork,
    StreamIntake,
)
from voxwire.workers.stream.queue import RANK, PartialTally, ReplayWork, Work, WorkQueue
from voxwire.workers.stream.results import Decoded as Decoded
from voxwire.workers.stream.results import Outbound as Outbound
from voxwire.workers.stream.results import Outcome as Outcome
from voxwire.workers.stream.results import Resume as Resume
from voxwire.workers.stream.results import Speakers as Speakers
from voxwire.workers.stream.tracks import Track, in_time_order, is_live_echo, stream_decoders
from voxwire.workers.transcript import (
    TranscriptBuilder,
    Words,
    prompt_context,
    words_between,
    words_of,
)
from voxwire.workers.vad import Vad
from voxwire_client.api import PromptSpec
from voxwire_client.messages import LatencyData, Message, SessionStatus
from voxwire_client.options import EndpointingPolicy
from voxwire_client.topics import validate_sid

log = logging.getLogger(__name__)


class StreamSession:
    """One live stream: chunks in (:meth:`push`), messages out (returned by
    :meth:`commit`, :meth:`finish` and :meth:`error`)."""

    def __init__(
        self,
        sid: str,
        options: EngineOptions,
        config: StreamConfig,
        prompts: Sequence[PromptSpec | Prompt],
        *,
        vad: Vad,
        now: Callable[[], float],
        first_seq: int = FIRST_WORKER_SEQ,
        resume: Resume | None = None,
        on_queued: Callable[[str, int], None] | None = None,
        keep_audio: Callable[[ChunkDecoder, int], ChunkDecoder] | None = None,
        opus: OpusLibrary | None = None,
        tuning: LiveTuning = UNTUNED,
        vad_factory: Callable[[], Vad] | None = None,
    ) -> None:
        """Raises ``InvalidSessionIdError`` (a ``ValueError``) for an unsafe ``sid``
        and :class:`ConfigError` for an unusable prompt.

        ``resume`` goes on from where another worker left the stream: chunks
        before ``resume.chunk`` are ignored as redeliveries, the settled start
        of that chunk is skipped, and seq, segment index and stream time carry on.
        ``on_queued`` is told the sid and the :data:`RANK` of each item queued.
        ``keep_audio`` wraps the chunk decoder (given its output's first sample): an archive.
        ``opus``: the libopus that decodes an Opus stream (None: FFmpeg's decoder).
        ``tuning``: how its finals are decoded (the worker's, :class:`LiveTuning`).
        ``vad_factory``: a VAD for each channel after the first (``vad``'s), for a
        stream with separate channels (needed then).
        """
        if first_seq < 1:
            raise ValueError(f"first_seq must be at least 1, not {first_seq}")
        self.sid = validate_sid(sid)
        self.options = config.engine_options(options)
        self._context_chars = tuning.context_chars
        self._early = config.endpointing.policy is EndpointingPolicy.FAST
        self._now = now
        self._prompts_changed = resume is not None and resume.prompts is not None
        if resume is not None and resume.prompts is not None:
            prompts = resume.prompts
        self._builder = TranscriptBuilder(
            self.sid,
            language=None if config.language == "auto" else config.language,
            model=config.model,
            redact=config.redact,
            prompts=prompts,
            first_seq=resume.next_seq if resume else first_seq,
            finals=resume.finals if resume else (),
            task=config.task,
        )
        if config.channels > 1 and vad_factory is None:
            raise ValueError("a stream with separate channels needs a vad_factory")
        start = resume or Resume(first_seq)
        decoders = stream_decoders(  # a resumed stream's first chunk comes whole
            config,
            first_sample=start.stream_sample - start.skip_samples,
            from_start=start.chunk == 0,
            keep_audio=keep_audio,
            opus=opus,
        )
        self._tracks = [
            Track(
                StreamIntake(
                    self.sid,
                    config.endpointer,
                    vad if n == 0 or vad_factory is None else vad_factory(),
                    origin_sample=start.stream_sample,
                    next_chunk=start.chunk,
                    skip_samples=start.skip_samples,
                    decoder=decoder,
                    lead_ms=tuning.lead_ms,
                    track=n,
                    early=start.early[n] if n < len(start.early) else None,
                ),
                (start.chunk, start.skip_samples, start.stream_sample),
                label=config.labels[n] if config.labels else None,
                resumed=start.tracks[n] if n < len(start.tracks) else start.stream_sample,
            )
            for n, decoder in enumerate(decoders)
        ]
        self._intake = self._tracks[0].intake  # the stream's chunks and time: the same in all
        self._queue = WorkQueue(None if on_queued is None else partial(on_queued, self.sid))
        self._finished = start.finished
        self._partials = PartialTally()
        self._speakers = StreamSpeakers(config.diarize, config.max_speakers, start.speakers)
        self._speaker_state = start.speakers  # as of the last final committed
        if resume is None:
            self._queue.put(ProgressWork(speech=False, stream_ms=0, decided_at=now()))
        else:
            for track in self._tracks:
                track.intake.ended = resume.finished
            if resume.pending:
                self._queue.put(ReplayWork(resume.pending, now()))

    # --- state ----------------------------------------------------------------------------------

    def resume_point(self) -> Resume:
        """Where the stream stands after everything returned so far."""
        chunk, skip, sample = min((t.settled for t in self._tracks), key=lambda p: p[2])
        prompts = self._builder.prompts if self._prompts_changed else None
        tracks = tuple(t.settled[2] for t in self._tracks) if len(self._tracks) > 1 else ()
        return Resume(
            self._builder.next_seq,
            tuple(self._builder.finals),
            chunk,
            skip,
            sample,
            (),
            self._finished,
            prompts,
            self._speaker_state,
            tracks,
            tuple(t.intake.early for t in self._tracks),
        )

    @property
    def diarized(self) -> bool:
        """Whether the stream asked for its speakers."""
        return self._speakers.on

    @property
    def next_chunk(self) -> int:
        """The number of the next chunk expected."""
        return self._intake.next_chunk

    @property
    def stream_ms(self) -> int:
        """Stream time at the end of the audio accepted so far."""
        return self._intake.stream_ms

    @property
    def buffered_ms(self) -> int:
        """Stream audio held for open and coming segments (the most of any channel)."""
        return max(t.intake.buffered_ms for t in self._tracks)

    @property
    def ended(self) -> bool:
        """:meth:`end` was called (here or, for a resumed stream, before)."""
        return self._intake.ended

    @property
    def finished(self) -> bool:
        """The transcript was emitted (here or, for a resumed stream, before)."""
        return self._finished

    @property
    def skipped_partials(self) -> int:
        """Partials dropped unseen for a newer partial or final of their segment."""
        return self._queue.skipped_partials

    @property
    def preempted_partials(self) -> int:
        """Partials stopped because a final needed the engine."""
        return self._partials.preempted

    @property
    def late_partials(self) -> int:
        """Partials dropped: they finished after their segment's final or a newer partial."""
        return self._partials.late

    def lag_ms(self) -> int:
        """How far the engine is behind: the age (by the injected clock) of the
        oldest work queued or being transcribed; 0 when it is idle."""
        oldest = self._queue.oldest()
        return 0 if oldest is None else _ms(self._now() - oldest.decided_at)

    # --- ingestion ------------------------------------------------------------------------------

    def push(self, chunk_seq: int, pcm: bytes, received_at: float) -> None:
        """Take chunk ``chunk_seq`` and queue the work it made due (see
        :meth:`StreamIntake.push <voxwire.workers.stream.intake.StreamIntake.push>`
        for the chunk rules and the errors raised)."""
        refused: AudioError | None = None
        for track in self._tracks:  # each takes the chunk (its channel), refused or not
            try:
                for work in track.intake.push(chunk_seq, pcm, received_at):
                    self._queue.put(work)
            except AudioError as exc:
                refused = refused or exc
        errors = [t.intake.take_decode_error() for t in self._tracks]
        error = refused or next((e for e in errors if e is not None), None)
        if error is not None:  # its audio was replaced by silence and is queued
            raise error

    def end(self, received_at: float, *, give_up: bool = False) -> None:
        """End of stream (signalled at ``received_at``): close the open segment.
        Its final is queued; run the queued work, then :meth:`finish`. While
        chunks wait for those before them the end waits too (:attr:`ended` stays
        False), unless ``give_up``. A second call does nothing."""
        for track in self._tracks:
            for work in track.intake.end(received_at, give_up=give_up):
                self._queue.put(work)

    def flush(self, received_at: float) -> None:
        """The client asked (at ``received_at``) for the open utterance now: its
        final is queued (marked ``flushed``) and the stream goes on."""
        for track in self._tracks:
            for work in track.intake.flush(received_at):
                self._queue.put(work)

    @property
    def end_waiting_since(self) -> float | None:
        """When an end arrived that still waits for chunks before it (None: none)."""
        return self._intake.end_waiting_since

    @property
    def missing(self) -> tuple[int, int] | None:
        """The chunks that chunks waiting ahead of their turn wait for (first, last)."""
        return self._intake.missing

    def change_prompts(self, add: Sequence[PromptSpec], remove: Sequence[str]) -> None:
        """Remove, then add, standing prompts: they apply from the next final on
        (with the finals before it, see :mod:`voxwire.text.standing_prompts`). All
        or nothing; a bad change raises ConfigError."""
        try:
            check_speakers(add, diarized=self._speakers.on)
        except ValueError as exc:
            raise ConfigError(
                f"prompts not changed: {exc}", hint="drop the prompt's speaker", sid=self.sid
            ) from exc
        self._builder.change_prompts(add, remove)
        self._prompts_changed = True

    # --- the scheduler's side -------------------------------------------------------------------

    def next_rank(self) -> tuple[int, float] | None:
        """How urgent the next queued item is, for a scheduler that serves many
        sessions with one engine: lower first (progress, then finals, likely
        finals, partials; older first); None when nothing is queued."""
        work = self._queue.next()
        return None if work is None else (RANK[type(work)], work.decided_at)

    def take(self) -> Work | None:
        """The next item, in flight until :meth:`commit`; None when none is queued."""
        return self._queue.take()

    def take_final(self) -> FinalWork | None:
        """The next item when it is a final the engine must transcribe (for a
        scheduler that transcribes the finals of several sessions in one engine
        call); None otherwise, and the item stays queued."""
        work = self._queue.take(lambda w: type(w) is FinalWork and self.needs_engine(w))
        assert work is None or isinstance(work, FinalWork)
        return work

    def engine_options(self, work: Work) -> EngineOptions:
        """The engine options to decode ``work`` with: a final's and a likely
        final's get the end of the stream's earlier finals (as delivered, a
        resumed stream's included) as the decoder's prompt, at most
        ``LiveTuning.context_chars`` characters of it; partials get none."""
        chars = self._context_chars
        if chars <= 0 or not isinstance(work, FinalWork | LikelyFinalWork):
            return self.options
        channel = self._channel(work.track)
        finals = (f.text for f in self._builder.finals if f.channel == channel)
        context = prompt_context(finals, chars)
        if not context:
            return self.options
        prompt = " ".join(filter(None, (self.options.initial_prompt, context)))
        return replace(self.options, initial_prompt=prompt)

    def needs_engine(self, work: Work) -> bool:
        """Whether ``work`` needs a transcript from the engine (not a final the
        likely final of its bounds already transcribed)."""
        if isinstance(work, FinalWork):
            return self._likely_text(work) is None
        return isinstance(work, PartialWork)

    def commit(self, work: Work, decoded: Decoded) -> Outbound:
        """What taken ``work`` comes to, given what the engine made of it: the
        one path from work to messages (none after a fatal error)."""
        try:
            messages = [] if self._queue.closed else self._commit(work, decoded)
        except Exception as exc:  # a bug, not bad input: the session still gets its ending
            log.exception("stream %s: committing %s failed", self.sid, type(work).__name__)
            messages = self._error(_failure(exc), fatal=True)
        finally:
            self._queue.done(work)
        return self._out(messages)

    def _commit(self, work: Work, decoded: Decoded) -> list[Message]:
        if isinstance(work, ReplayWork):
            return list(work.messages)
        if isinstance(work, ProgressWork):
            return [self._progress(SessionStatus.TRANSCRIBING, work.stream_ms, speech=work.speech)]
        outcome, started = decoded.outcome, decoded.started
        if isinstance(outcome, BaseException):
            return self._failed(outcome)
        if outcome is None:  # a final whose likely final was transcribed
            assert isinstance(work, FinalWork)
            STREAM_FINALS.labels("early" if work.reason == "early" else "likely").inc()
            latency = self._latency(work, started, transcribed=started)
            text, words = self._likely_text(work) or ("", ())
            return self._final(work, text, words, latency, decoded)
        transcribed = started if decoded.finished is None else decoded.finished
        latency = self._latency(work, started, transcribed=transcribed)
        if isinstance(work, FinalWork | LikelyFinalWork):
            self._keep_language(outcome)
        text = self._builder.heard(outcome, work.vad_mean)
        words = words_of(outcome, work.start_ms) if text else ()
        if isinstance(work, LikelyFinalWork):
            self._tracks[work.track].likely = (work.start_ms, work.end_ms, text, words)
            if self._early_final(work, text):
                return []  # the final, queued, goes out with this text
        if isinstance(work, FinalWork):
            STREAM_FINALS.labels("transcribed").inc()
            return self._final(work, text, words, latency, decoded)
        if self._stale(work):
            self._partials.late += 1
            STREAM_PARTIALS.labels("superseded").inc()
            return []
        self._tracks[work.track].shown = (work.start_ms, work.end_ms)
        return self._builder.partial(work.start_ms, work.end_ms, text, latency)

    def _early_final(self, work: LikelyFinalWork, text: str) -> bool:
        """Policy fast: a likely final whose text ends a sentence closes its segment
        now, if the pause goes on; the final is queued (True) and needs no engine."""
        if not self._early or not text or not sounds_finished(text, self._builder.language):
            return False
        early = self._tracks[work.track].intake.close_early(work.bounds, self._now())
        for item in early:
            self._queue.put(item)
        return bool(early)

    def _stale(self, work: PartialWork) -> bool:
        """A partial that finished after its segment's final, or after a newer
        partial of its segment (a final does not wait for its session's partial)."""
        track = self._tracks[work.track]
        finalized = work.start_ms * SAMPLES_PER_MS < track.settled[2]
        shown_start, shown_end = track.shown
        return finalized or (shown_start == work.start_ms and shown_end >= work.end_ms)

    def _keep_language(self, segments: list[Segment]) -> None:
        """``language`` "auto": the language detected on the first final (or the
        likely final that becomes it) holds for the rest of the stream."""
        if self._builder.language is not None or not segments or not segments[0].language:
            return
        first = segments[0]
        self._builder.detected(first.language or "en", first.language_prob)
        self.options = replace(self.options, language=first.language or "en")

    def _failed(self, exc: BaseException) -> list[Message]:
        """The engine raised ``exc`` for an item."""
        if isinstance(exc, TranscriptionAborted):
            self._partials.preempted += 1
            return []
        if isinstance(exc, VoxwireError):
            exc.sid = exc.sid or self.sid
            return self._error(exc)
        # a bug, not bad input: the session still gets its ending
        log.error("stream %s failed inside the engine", self.sid, exc_info=exc)
        return self._error(_failure(exc), fatal=True)

    def _final(
        self, work: FinalWork, text: str, words: Words, latency: LatencyData, decoded: Decoded
    ) -> list[Message]:
        track = self._tracks[work.track]
        track.likely = None
        self._builder.end_segment()
        track.settled = (*work.settled, work.end_ms * SAMPLES_PER_MS)
        if not text or self._heard_before(work, text):
            return []
        if track.label is not None:  # a channel of its own: its label says who spoke
            channel = work.track + 1
            return self._builder.final(
                work.start_ms, work.end_ms, text, latency, words,
                speaker=track.label, channel=channel, continues=work.continues,
                flushed=work.reason == "flush",
            )  # fmt: skip
        pieces, self._speaker_state = decoded.speakers or self._find_speakers(work, text)
        messages: list[Message] = []
        for n, one in enumerate(pieces):
            inside = words_between(words, one.start_ms, one.end_ms)
            messages += self._builder.final(
                *one.span, latency, inside, speaker=one.speaker, continues=work.continues and not n,
                flushed=work.reason == "flush" and n == len(pieces) - 1,
            )  # fmt: skip
        return messages

    def speakers_of(self, work: Work, outcome: Outcome) -> Speakers | None:
        """For an engine's thread, while it holds ``work``: the speakers of a
        diarized stream's final (the heavy part of committing it, done where the
        engine ran); None for anything else. Besides ``outcome`` it reads only the
        likely final's text (committed before the final was taken) and changes
        only the speakers, which finals alone use, one at a time."""
        if not self.diarized or not isinstance(work, FinalWork):
            return None
        if isinstance(outcome, BaseException):
            return None
        if outcome is None:
            text = (self._likely_text(work) or ("", ()))[0]
        else:
            text = self._builder.heard(outcome, work.vad_mean)
        return self._find_speakers(work, text) if text else None

    def _find_speakers(self, work: FinalWork, text: str) -> Speakers:
        pieces = self._speakers.pieces(*work.bounds, text, work.audio)
        return tuple(pieces), self._speakers.state()

    def finish(self) -> Outbound:
        """After :meth:`end` and the work it queued: the transcript and the
        ``completed`` progress (nothing after a fatal error, nor a second time)."""
        if not self.ended:
            raise RuntimeError("finish() must come after end()")
        if self._finished or self._queue.closed:
            self._finished = True
            return self._out([])
        duration = self.stream_ms
        transcript = self._builder.transcript(duration)
        if len(self._tracks) > 1:  # the channels' finals merged in time order
            transcript = in_time_order(transcript)
        completed = self._progress(SessionStatus.COMPLETED, duration, speech=False)
        self._finished = True
        for track in self._tracks:  # nothing after end()
            track.settled = (self.next_chunk, 0, track.intake.samples)
        return self._out([transcript, completed])

    def error(self, exc: VoxwireError, *, fatal: bool = False) -> Outbound:
        """``exc`` as an error message. A fatal error closes the session: queued
        work is dropped and nothing more is decided."""
        return self._out(self._error(exc, fatal=fatal))

    def _error(self, exc: VoxwireError, *, fatal: bool = False) -> list[Message]:
        if self._queue.closed:
            return []
        message = self._builder.error(exc, fatal=fatal)
        if fatal:
            self._queue.close()
            for track in self._tracks:
                track.intake.fail()
        return [message]

    def _out(self, messages: list[Message]) -> Outbound:
        return Outbound(tuple(messages), self.resume_point())

    def _channel(self, track: int) -> int | None:
        """The channel number (1, 2...) of a track's finals; None: a mono stream."""
        return None if self._tracks[track].label is None else track + 1

    def _heard_before(self, work: FinalWork, text: str) -> bool:
        """A final of a channel that was decided before the session resumed here,
        or one that only echoes another channel's (:func:`is_live_echo`)."""
        track = self._tracks[work.track]
        if (work.start_ms + work.end_ms) * SAMPLES_PER_MS // 2 < track.resumed:
            return True
        channel = self._channel(work.track)
        if channel is None:
            return False
        final = TrackFinal(channel, work.start_ms, work.end_ms, text)
        recent = self._builder.finals[-20:]
        return is_live_echo(final, recent, self._level_db)

    def _level_db(self, channel: int, start_ms: int, end_ms: int) -> float:
        return self._tracks[channel - 1].intake.level_db(start_ms, end_ms)

    def _likely_text(self, work: FinalWork) -> tuple[str, Words] | None:
        """Text and words of the likely final with this final's bounds, if transcribed."""
        likely = self._tracks[work.track].likely
        if likely and likely[:2] == (work.start_ms, work.end_ms):
            return likely[2], likely[3]
        return None

    def _latency(self, work: SliceWork, started: float, *, transcribed: float) -> LatencyData:
        return LatencyData(
            vad_ms=_ms(work.decided_at - work.audio_end_at),
            queue_ms=_ms(started - work.decided_at),
            transcribe_ms=_ms(transcribed - started),
        )

    def _progress(self, status: SessionStatus, stream_ms: int, *, speech: bool) -> Message:
        skipped = self.skipped_partials + self.preempted_partials + self.late_partials
        STREAM_LAG.observe((lag_ms := self.lag_ms()) / 1000)
        return self._builder.stream_progress(
            status, stream_ms, speech=speech, lag_ms=lag_ms, partials_skipped=skipped
        )


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _failure(exc: BaseException) -> VoxwireError:
    """An unexpected exception (a bug) as the error its session ends with."""
    return VoxwireError(f"transcription failed: {type(exc).__name__}", hint="retry later")
