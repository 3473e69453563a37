"""A live stream's intake: PCM chunks in, work items out. Pure: no engine, no
emit, no locks, no clock (arrival times come with the audio).

:class:`StreamIntake` cuts the accepted audio into VAD frames
(:class:`~voxwire.workers.stream.audio.FrameSplitter`), scores each with the
session's :class:`~voxwire.workers.vad.Vad`, feeds the probabilities to the
:class:`~voxwire.workers.stream.endpointing.Endpointer` and turns its events into
work items, each holding a copy of its audio and its times:

- ``PartialDue`` -> :class:`PartialWork` (the open segment so far);
- ``FinalLikely`` -> :class:`LikelyFinalWork` (the segment a pause may close);
- ``SegmentFinal`` -> :class:`FinalWork` (a segment to commit), with the
  point where the audio after it starts (``settled``: chunk and samples);
- ``SpeechStarted`` / ``SpeechStopped`` -> :class:`ProgressWork`;
- ``Dropped`` -> nothing.

Chunks. ``chunk_seq`` counts from 0. A chunk already seen is ignored (a QoS 1
redelivery). One that skips ahead waits (if at most :data:`MAX_AHEAD` chunks ahead) and is
taken once the chunks before it came: with several bridges a stream's chunks
reach the bus by different ways and may pass each other (a killed bridge's
share of them comes only once it is back). An end that arrives while chunks
wait is held too, and comes once they are taken (so is a flush,
:meth:`StreamIntake.flush`); :meth:`StreamIntake.end` with
``give_up`` takes the chunks that came and ends without those that did not
(their gap reported as a :class:`ChunkOrderError` by the caller). A chunk
further ahead raises :class:`ChunkOrderError` and is not consumed. Chunks are
decoded by the stream's :class:`~voxwire.audio.codecs.ChunkDecoder` (PCM16 by default). A
chunk the decoder refuses (PCM with an odd byte count) raises
:class:`~voxwire.core.errors.AudioError` and *is* consumed (its audio dropped:
redelivery cannot fix it), so stream time counts accepted audio only; a chunk
the decoder replaces by silence (a bad Opus packet) is used, and its error is
left for :meth:`StreamIntake.take_decode_error`. After :meth:`StreamIntake.end`
or :meth:`StreamIntake.fail`, new chunks raise :class:`StreamClosedError`.

Resuming. An intake made with ``origin_sample``, ``next_chunk`` and
``skip_samples`` (a :class:`~voxwire.workers.stream.session.Resume` point)
ignores the chunks before ``next_chunk``, skips the settled start of that
chunk and counts stream time on from ``origin_sample``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from voxwire.audio.codecs import ChunkDecoder, Pcm16Decoder
from voxwire.audio.decoding import SAMPLE_RATE, Audio
from voxwire.core.errors import AudioError
from voxwire.workers.stream.audio import FrameSplitter, SegmentBuffer
from voxwire.workers.stream.endpointing import (
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
from voxwire.workers.stream.lead import lead_ms_for
from voxwire.workers.vad import FRAME_SAMPLES, Vad

SAMPLES_PER_MS = SAMPLE_RATE // 1000
_NO_AUDIO: Audio = np.empty(0, dtype=np.float32)


_LEVEL_FRAMES = 2_000
"""VAD frames whose level an intake keeps (64 s of 32 ms frames)."""

MAX_AHEAD = 600
"""How far ahead of its turn a chunk may come and wait (a minute of 100 ms chunks)."""


class ChunkOrderError(AudioError):
    """A chunk arrived too far ahead of its turn, or never came (a gap in ``chunk_seq``)."""

    code = "chunk_order"


class StreamClosedError(AudioError):
    """Audio arrived after the stream ended or failed."""

    code = "stream_closed"


# --- work items -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class SliceWork:
    """A stretch of the stream's audio for the engine."""

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
    lead: Audio = field(default_factory=lambda: _NO_AUDIO, repr=False, kw_only=True)
    """The stream audio right before ``start_ms`` to decode it after (finals and
    likely finals, when the intake keeps a lead: :mod:`voxwire.workers.stream.lead`)."""
    track: int = field(default=0, kw_only=True)
    """The channel it was heard on (0, 1...: a stream with separate channels has
    an intake per channel; 0 for a mono stream)."""

    @property
    def bounds(self) -> tuple[int, int]:
        """``(start_ms, end_ms)``."""
        return self.start_ms, self.end_ms


@dataclass(frozen=True, slots=True, eq=False)
class PartialWork(SliceWork):
    """Transcribe the open segment so far; may be skipped for a newer one."""


@dataclass(frozen=True, slots=True, eq=False)
class LikelyFinalWork(PartialWork):
    """Transcribe the segment a pause may close (sent as a partial); the text
    serves the final at once when the final's bounds turn out the same."""


@dataclass(frozen=True, slots=True, eq=False)
class FinalWork(SliceWork):
    """Transcribe and commit a segment; never skipped."""

    reason: FinalReason
    settled: tuple[int, int]
    """(chunk, samples of it) where the audio after the segment starts."""
    continues: bool = False
    """The segment goes on with the utterance of the final before (an early close's):
    its ``lead`` holds that utterance, up to Whisper's window."""


@dataclass(frozen=True, slots=True)
class ProgressWork:
    """Report the speech state at ``stream_ms``."""

    speech: bool
    stream_ms: int
    decided_at: float
    track: int = 0


@dataclass(frozen=True, slots=True)
class _Arrival:
    """An accepted chunk: its number, its samples' place in the stream, its arrival."""

    chunk: int
    start: int
    end: int
    received_at: float


IntakeWork = PartialWork | FinalWork | ProgressWork


@dataclass
class _Waiting:
    """Chunks that came ahead of their turn, and an end that came before them."""

    chunks: dict[int, tuple[bytes, float]] = field(default_factory=dict)
    """Chunk number -> (its bytes, when it arrived)."""
    end_at: float | None = None
    flush_at: float | None = None
    refused: AudioError | None = None
    """The error of a waiting chunk refused when its turn came."""


class StreamIntake:
    """Framing, VAD and endpointing of one stream; see the module docstring."""

    def __init__(
        self,
        sid: str,
        endpointing: EndpointConfig,
        vad: Vad,
        *,
        origin_sample: int = 0,
        next_chunk: int = 0,
        skip_samples: int = 0,
        decoder: ChunkDecoder | None = None,
        lead_ms: int = 0,
        track: int = 0,
        early: tuple[int, int] | None = None,
    ) -> None:
        """``track``: the channel this intake hears (0 for a mono stream), on its work;
        ``early``: the early close a resumed stream may go on with (:attr:`early`)."""
        self.sid = sid
        self.track = track
        self._lead_ms = max(0, lead_ms)  # kept before a final
        self._vad = vad
        self._decoder = decoder or Pcm16Decoder()
        self._endpointer = Endpointer(
            endpointing, start_ms=origin_sample // SAMPLES_PER_MS, early=early
        )
        self._splitter = FrameSplitter(FRAME_SAMPLES, start_sample=origin_sample)
        max_seconds = 2 * endpointing.max_segment_s + 10 + self._lead_ms / 1000
        self._buffer = SegmentBuffer(max_seconds=max_seconds, start_sample=origin_sample)
        self._tail: Audio = np.empty(0, dtype=np.float32)  # samples not yet in a frame
        self.samples = origin_sample  # stream time at the end of the accepted audio
        self._arrivals: deque[_Arrival] = deque()
        self._probabilities: deque[tuple[int, float]] = deque()  # (frame start ms, probability)
        self._levels: deque[tuple[int, float]] = deque(maxlen=_LEVEL_FRAMES)  # (ms, mean square)
        self.next_chunk = next_chunk
        self._skip = skip_samples  # settled samples of the next chunk
        self._waiting = _Waiting()
        self.ended = False
        self.failed = False

    @property
    def stream_ms(self) -> int:
        """Stream time at the end of the audio accepted so far."""
        return self.samples // SAMPLES_PER_MS

    @property
    def early(self) -> tuple[int, int] | None:
        """The early close speech may still go on with (see ``Endpointer.early``)."""
        return self._endpointer.early

    @property
    def buffered_ms(self) -> int:
        """Stream audio held for open and coming segments."""
        return (self._buffer.held_samples + self._tail.size) // SAMPLES_PER_MS

    def fail(self) -> None:
        """The session failed: later chunks raise :class:`StreamClosedError`."""
        self.failed = True

    def push(self, chunk_seq: int, pcm: bytes, received_at: float) -> list[IntakeWork]:
        """Take chunk ``chunk_seq`` (in the stream's codec) that arrived at
        ``received_at``, and the waiting chunks it lets through; return the work
        they made due. Ignores a chunk already seen; keeps one ahead of its turn;
        raises :class:`ChunkOrderError` for one too far ahead,
        :class:`AudioError` for a chunk the decoder refuses (one that waited:
        from :meth:`take_decode_error`) and :class:`StreamClosedError` after
        :meth:`end` or :meth:`fail`."""
        if 0 <= chunk_seq < self.next_chunk or chunk_seq in self._waiting.chunks:
            return []  # a redelivery
        if self.ended or self.failed:
            state = "failed" if self.failed else "ended"
            raise StreamClosedError(
                f"chunk {chunk_seq} arrived after the stream {state}",
                hint="start a new session to stream more audio",
                sid=self.sid,
            )
        if chunk_seq != self.next_chunk:
            if chunk_seq < 0 or chunk_seq - self.next_chunk > MAX_AHEAD:
                raise ChunkOrderError(
                    f"chunk {chunk_seq} arrived out of order: the stream expects chunk "
                    f"{self.next_chunk} next",
                    hint="send chunks in order, numbered consecutively from 0",
                    sid=self.sid,
                )
            self._waiting.chunks[chunk_seq] = (pcm, received_at)
            return []
        try:
            work = self._accept(pcm, received_at)
        except AudioError as exc:
            if self.next_chunk not in self._waiting.chunks:
                raise
            work, self._waiting.refused = [], exc  # from take_decode_error, after those behind
        while (waiting := self._waiting.chunks.pop(self.next_chunk, None)) is not None:
            try:
                work += self._accept(*waiting)
            except AudioError as exc:
                self._waiting.refused = self._waiting.refused or exc
        if self._waiting.flush_at is not None and not self._waiting.chunks:
            work += self.flush(self._waiting.flush_at)
        if self._waiting.end_at is not None and not self._waiting.chunks:
            work += self.end(self._waiting.end_at)
        return work

    def _accept(self, pcm: bytes, received_at: float) -> list[IntakeWork]:
        """Decode and take the expected chunk (see :meth:`push`)."""
        chunk_seq = self.next_chunk
        self.next_chunk += 1  # consumed even if refused below: redelivery cannot fix it
        try:
            samples = self._decoder.decode(pcm)
        except AudioError as exc:
            exc.sid = self.sid
            raise
        if self._skip:  # settled before this stream was resumed here
            samples, self._skip = samples[self._skip :], 0
        if samples.size == 0:
            return []
        first = self.samples
        self.samples += samples.size
        self._arrivals.append(_Arrival(chunk_seq, first, self.samples, received_at))
        work: list[IntakeWork] = []
        for start_ms, frame in self._splitter.push(samples):
            self._buffer.append(frame)
            self._levels.append((start_ms, float(np.mean(np.square(frame, dtype=np.float64)))))
            probability = self._vad.speech_probability(frame)
            self._probabilities.append((start_ms, probability))
            work += self._handle(self._endpointer.push(start_ms, probability), received_at)
            self._forget_old()
        self._keep_tail(samples)
        return work

    def level_db(self, start_ms: int, end_ms: int) -> float:
        """The RMS level (dB, full scale 0; -120 for silence or audio no longer
        known) of the frames starting in ``[start_ms, end_ms)``, over the last
        :data:`_LEVEL_FRAMES` frames: to tell a channel's echo of another."""
        squares = [m for s, m in self._levels if start_ms <= s < end_ms]
        if not squares:
            return -120.0
        return 10 * math.log10(max(sum(squares) / len(squares), 1e-12))

    def take_decode_error(self) -> AudioError | None:
        """The error of a chunk that was replaced by silence since the last call."""
        error = self._decoder.take_error() or self._waiting.refused
        self._waiting.refused = None
        if error is not None:
            error.sid = self.sid
        return error

    @property
    def missing(self) -> tuple[int, int] | None:
        """The first and last chunk that chunks waiting ahead of their turn
        still wait for; None when none waits."""
        if not self._waiting.chunks:
            return None
        return self.next_chunk, min(self._waiting.chunks) - 1

    @property
    def end_waiting_since(self) -> float | None:
        """When an end arrived that waits for chunks before it; None: none waits."""
        return None if self.ended else self._waiting.end_at

    def end(self, received_at: float, *, give_up: bool = False) -> list[IntakeWork]:
        """End of stream (signalled at ``received_at``): close the open segment
        and return its work. While chunks wait ahead of their turn the end waits
        for them (and returns nothing), unless ``give_up``: then the chunks that
        came are taken in order, without those that never did. A second call
        returns nothing."""
        if self.ended:
            return []
        if self._waiting.chunks and not give_up:
            if self._waiting.end_at is None:
                self._waiting.end_at = received_at
            return []
        work: list[IntakeWork] = []
        for chunk_seq in sorted(self._waiting.chunks):  # past the gaps
            self.next_chunk = chunk_seq
            try:
                work += self._accept(*self._waiting.chunks[chunk_seq])
            except AudioError as exc:
                self._waiting.refused = self._waiting.refused or exc
        self._waiting = _Waiting(refused=self._waiting.refused)
        self.ended = True
        if self._tail.size:  # the last samples, too few for a VAD frame, belong to the segment
            self._buffer.append(self._tail)
            self._tail = np.empty(0, dtype=np.float32)
        return work + self._handle(self._endpointer.end_of_stream(self._buffer.end_ms), received_at)

    def flush(self, received_at: float) -> list[IntakeWork]:
        """The client asked (at ``received_at``) for the open segment now: close it
        at the end of the audio taken (:meth:`Endpointer.flush
        <voxwire.workers.stream.endpointing.Endpointer.flush>`) and return its
        final's work; the stream goes on. While chunks wait ahead of their turn
        the flush waits for them, as an end does; after the end, nothing."""
        if self.ended or self.failed:
            return []
        if self._waiting.chunks:
            if self._waiting.flush_at is None:
                self._waiting.flush_at = received_at
            return []
        self._waiting.flush_at = None
        return self._handle(self._endpointer.flush(), received_at)

    def close_early(self, bounds: tuple[int, int], decided_at: float) -> list[IntakeWork]:
        """End the open segment at ``bounds`` (a likely final's) while its pause
        goes on (:meth:`Endpointer.close_early
        <voxwire.workers.stream.endpointing.Endpointer.close_early>`): its final's
        work, or nothing when speech resumed or the segment closed already."""
        if self.ended or self.failed:
            return []
        return self._handle(self._endpointer.close_early(*bounds), decided_at)

    def _handle(self, events: list[Event], decided_at: float) -> list[IntakeWork]:
        work: list[IntakeWork] = []
        for event in events:
            if isinstance(event, SpeechStarted | SpeechStopped):
                speech = isinstance(event, SpeechStarted)
                work.append(ProgressWork(speech, self._endpointer.now_ms, decided_at, self.track))
            elif isinstance(event, PartialDue | FinalLikely | SegmentFinal):
                work.append(self._slice(event, decided_at))
            # Dropped: a sound too short to be speech, nothing to do
        return work

    def _slice(
        self, event: PartialDue | FinalLikely | SegmentFinal, decided_at: float
    ) -> PartialWork | FinalWork:
        start, end = event.start_ms, event.end_ms
        audio = self._buffer.slice(start, end)
        probabilities = [p for s, p in self._probabilities if start <= s < end]
        vad_mean = float(np.mean(probabilities)) if probabilities else 0.0
        end_sample = end * SAMPLES_PER_MS
        arrived = next((a.received_at for a in self._arrivals if a.end >= end_sample), decided_at)
        if isinstance(event, PartialDue):
            return PartialWork(start, end, audio, vad_mean, arrived, decided_at, track=self.track)
        lead_ms = self._lead_ms
        if event.utterance_ms is not None:  # after the start of the utterance it goes on with
            lead_ms = max(lead_ms, start - event.utterance_ms)
        lead_from = max(start - lead_ms_for(lead_ms, end - start), self._buffer.start_ms)
        lead = self._buffer.slice(lead_from, start) if lead_from < start else _NO_AUDIO
        if isinstance(event, FinalLikely):
            return LikelyFinalWork(
                start, end, audio, vad_mean, arrived, decided_at, lead=lead, track=self.track
            )
        after = next((a for a in self._arrivals if a.end > end_sample), None)
        settled = (after.chunk, end_sample - after.start) if after else (self.next_chunk, 0)
        return FinalWork(
            start, end, audio, vad_mean, arrived, decided_at, event.reason, settled,
            event.continues, lead=lead, track=self.track,
        )  # fmt: skip

    def _forget_old(self) -> None:
        """Drop what no later event can reach back to: memory stays bounded."""
        keep_ms = self._endpointer.retain_from_ms
        self._buffer.discard_before(keep_ms - self._lead_ms)
        while self._probabilities and self._probabilities[0][0] < keep_ms:
            self._probabilities.popleft()
        while len(self._arrivals) > 1 and self._arrivals[0].end < keep_ms * SAMPLES_PER_MS:
            self._arrivals.popleft()

    def _keep_tail(self, samples: Audio) -> None:
        """Remember the samples the splitter holds back (for the end of the stream)."""
        pending = self._splitter.pending_samples
        joined = samples if pending <= samples.size else np.concatenate([self._tail, samples])
        self._tail = joined[joined.size - pending :].copy()
