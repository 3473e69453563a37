"""Streaming endpointing: VAD probabilities in, segment events out.

:class:`Endpointer` is a pure state machine (no audio, no clock, no I/O). Feed
it one speech probability per VAD frame with the frame's start in stream time
(ms since the first sample of the stream); it answers with typed events::

    SpeechStarted(start_ms)           speech confirmed; a segment is open
    PartialDue(start_ms, end_ms)      transcribe the open segment so far
    FinalLikely(start_ms, end_ms)     a pause began: if it lasts, this is the final
    SegmentFinal(start_ms, end_ms,    transcribe and commit this segment
                 reason, continues)   ("silence", "max_length", "end_of_stream",
                                       "early": see close_early,
                                       "flush": see flush)
    SpeechStopped(end_ms)             the speech that SpeechStarted announced ended
    Dropped(start_ms, end_ms)         a sound too short to be speech; nothing to do

The rules, with :class:`EndpointConfig`'s defaults:

- Hysteresis (as Silero recommends): a frame whose probability is at least
  ``threshold`` (0.5) starts speech; speech goes on until a frame falls below
  ``threshold - hysteresis`` (0.35). Frames in between keep the current state.
- Micro-sounds: a candidate segment becomes speech (``SpeechStarted``) once it
  holds ``min_speech_ms`` (250) of voiced frames, i.e. frames in the speaking
  state, pauses excluded. A candidate that falls silent for ``min_silence_ms``
  before that, or meets the end of the stream, is ``Dropped``: coughs, clicks
  and noise bursts never reach the engine.
- Final: ``min_silence_ms`` (600) of silence after speech closes the segment
  (``SegmentFinal(reason="silence")``, then ``SpeechStopped``). Speech that
  resumes earlier continues the same segment.
- Early finals: once a pause has lasted ``post_roll_ms``, the bounds the
  final will have if the pause goes on to ``min_silence_ms`` are known:
  ``FinalLikely`` says so (once per pause, for confirmed speech that will
  not be dropped), so the caller can start transcribing the segment 400 ms
  before the final is due and hand the final out as soon as it is.
- Early close (the ``fast`` policy, whose ``post_roll_ms`` is 128):
  :meth:`Endpointer.close_early` ends the open segment at the
  bounds a ``FinalLikely`` gave, while that pause still goes on (the caller
  heard a finished sentence in the likely final's transcript):
  ``SegmentFinal(reason="early")``, then ``SpeechStopped``. Speech that
  resumes before the pause reaches ``min_silence_ms`` opens a segment that
  continues the early one's utterance: its ``FinalLikely`` and ``SegmentFinal``
  carry where that utterance began (``utterance_ms``, kept in
  :attr:`Endpointer.retain_from_ms`), so the caller decodes the segment after
  it and joins the two.
- Partials: each time the open segment's length (from its padded start)
  crosses a multiple of ``partial_interval_s`` (2.0 s), ``PartialDue`` asks
  for a transcript of the segment so far. ``0`` turns partials off.
- Forced final: a segment reaching ``max_segment_s`` (30 s) is closed with
  reason ``"max_length"``; the next segment starts exactly where it ended,
  without a new ``SpeechStarted``. The cut goes, in order of preference, into
  the pause under way (after its post-roll), the middle of the most recent
  pause in the second half of the segment, or exactly ``max_segment_s`` after
  the segment's start (which may fall inside a frame).
- End of stream: :meth:`Endpointer.end_of_stream` closes an open segment
  (reason ``"end_of_stream"``) or drops a candidate.
- Flush: :meth:`Endpointer.flush` does the same at the end of the last frame
  (reason ``"flush"``) without ending the stream: the client asked for the
  open utterance now (a push-to-talk button released, Deepgram's ``Finalize``),
  and later frames open a new segment.

Padding. Every time in an event is a segment bound, padding included: a
segment starts ``pre_roll_ms`` (200) before the first speech frame and ends
``post_roll_ms`` (200) after the last one, so word onsets and trailing
consonants are not clipped. The start is clamped at 0 and at the end of the
previous segment (segments never overlap); the end is clamped to the audio
seen so far. A continuation segment after a forced final that turns out to
hold less than ``min_speech_ms`` of voiced frames is ``Dropped`` too (then
``SpeechStopped``): a cut right before the speaker stops must not send a
sliver of audio to the engine.

Audio. The caller keeps the stream's audio (see
:class:`voxwire.workers.stream.audio.SegmentBuffer`), slices out
``[start_ms, end_ms)`` for each ``PartialDue``/``SegmentFinal``, and may then
discard audio before :attr:`Endpointer.retain_from_ms`, which no later event
can reach back to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from voxwire.core.errors import ConfigError
from voxwire_client.options import PRE_ROLL_MS, Endpointing, EndpointingPolicy

_SESSION = Endpointing()
"""The defaults a session gets (declared once, in the contract)."""

FinalReason = Literal["silence", "max_length", "end_of_stream", "early", "flush"]

UTTERANCE_KEPT_MS = 30_000
"""How far an utterance that goes on after an early close reaches back: Whisper's
window (what a decode can use), so a long monologue keeps bounded audio."""
POST_ROLL_MS = 200
"""Audio kept after an utterance's last speech frame, so its last word is whole."""
FAST_POST_ROLL_MS = 128
"""The same under the fast policy, where it is also how far into a pause the
likely final is decoded (four VAD frames): against 200 ms, finals came 0.1 s
sooner at the same WER (``benchmarks/bench_streams.py``)."""


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Per-session endpointing settings. Override with ``dataclasses.replace``.

    Raises :class:`voxwire.core.errors.ConfigError` for values out of range."""

    threshold: float = _SESSION.vad_threshold
    hysteresis: float = 0.15
    min_silence_ms: int = _SESSION.min_silence_ms
    min_speech_ms: int = _SESSION.min_speech_ms
    partial_interval_s: float = _SESSION.partial_interval_s
    max_segment_s: float = _SESSION.max_segment_s
    pre_roll_ms: int = PRE_ROLL_MS
    post_roll_ms: int = POST_ROLL_MS
    frame_ms: int = 32

    @classmethod
    def of(cls, session: Endpointing) -> EndpointConfig:
        """The endpointer's settings for what a session asked for."""
        fast = session.policy is EndpointingPolicy.FAST
        return cls(
            post_roll_ms=FAST_POST_ROLL_MS if fast else POST_ROLL_MS,
            threshold=session.vad_threshold,
            min_silence_ms=session.min_silence_ms,
            min_speech_ms=session.min_speech_ms,
            partial_interval_s=session.partial_interval_s,
            max_segment_s=session.max_segment_s,
        )

    def __post_init__(self) -> None:
        interval, longest = self.partial_interval_s, self.max_segment_s
        checks = [
            ("threshold", 0.0 < self.threshold < 1.0, "lie between 0 and 1"),
            ("hysteresis", 0.0 <= self.hysteresis < 1.0, "lie in [0, 1)"),
            ("frame_ms", self.frame_ms > 0, "be positive"),
            ("min_silence_ms", self.min_silence_ms >= self.frame_ms, "be at least one frame"),
            ("min_speech_ms", self.min_speech_ms >= 0, "not be negative"),
            ("pre_roll_ms", self.pre_roll_ms >= 0, "not be negative"),
            ("post_roll_ms", self.post_roll_ms >= 0, "not be negative"),
            ("partial_interval_s", math.isfinite(interval) and interval >= 0, "be 0 or positive"),
            (
                "max_segment_s",
                math.isfinite(longest)
                and longest * 1000 >= 2 * (self.min_silence_ms + self.pre_roll_ms),
                "be at least twice min_silence_ms + pre_roll_ms",
            ),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ConfigError(
                    f"endpointing setting {name}={getattr(self, name)!r} must {rule}",
                    hint=f"change {name} in the session configuration",
                )

    @property
    def neg_threshold(self) -> float:
        """Below this probability speech ends (``threshold - hysteresis``, at least 0.01)."""
        return max(self.threshold - self.hysteresis, 0.01)

    @property
    def partial_interval_ms(self) -> int | None:
        """The partial cadence in ms, or None when partials are off."""
        return round(self.partial_interval_s * 1000) or None

    @property
    def max_segment_ms(self) -> int:
        return round(self.max_segment_s * 1000)


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """Speech confirmed; the open segment starts at ``start_ms``."""

    start_ms: int


@dataclass(frozen=True, slots=True)
class PartialDue:
    """Transcribe ``[start_ms, end_ms)``, the open segment so far (revisable)."""

    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class SegmentFinal:
    """Transcribe and commit ``[start_ms, end_ms)``. ``utterance_ms``: the speech
    went on within ``min_silence_ms`` of an early close, so this segment belongs
    to the utterance that began there (the early segment's start)."""

    start_ms: int
    end_ms: int
    reason: FinalReason
    utterance_ms: int | None = None

    @property
    def continues(self) -> bool:
        """It goes on with the utterance of the segment before."""
        return self.utterance_ms is not None


@dataclass(frozen=True, slots=True)
class FinalLikely:
    """If the pause under way lasts, ``[start_ms, end_ms)`` is the next final
    (``utterance_ms`` as :class:`SegmentFinal`'s)."""

    start_ms: int
    end_ms: int
    utterance_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    """The speech announced by the last :class:`SpeechStarted` ended at ``end_ms``."""

    end_ms: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """``[start_ms, end_ms)`` held a sound too short to be speech."""

    start_ms: int
    end_ms: int


Event = SpeechStarted | PartialDue | FinalLikely | SegmentFinal | SpeechStopped | Dropped


@dataclass(slots=True)
class _Open:
    """The segment being built (a candidate until ``confirmed``)."""

    start_ms: int  # padded start
    voiced_ms: int  # voiced time in this segment
    pause_since_ms: int | None = None  # start of the pause under way (= speech end)
    confirmed: bool = False
    next_partial_ms: int | None = None
    pause_mid_ms: int | None = None  # middle of the last finished pause
    voiced_since_pause_ms: int = 0
    likely_sent: bool = False  # FinalLikely said for the pause under way
    utterance_ms: int | None = None  # resumed within min_silence_ms of an early close: its start


class Endpointer:
    """Turns per-frame speech probabilities of one stream into segment events."""

    def __init__(
        self,
        config: EndpointConfig | None = None,
        *,
        start_ms: int = 0,
        early: tuple[int, int] | None = None,
    ) -> None:
        """``start_ms``: the stream time of the first frame (a resumed stream's);
        ``early``: the :attr:`early` close it resumes after."""
        self.config = config or EndpointConfig()
        self._now_ms = start_ms  # end of the last frame seen
        self._last_end_ms = start_ms  # end of the last segment handed out
        self._open: _Open | None = None
        self._early = early  # an early close: (its pause, its utterance)

    @property
    def early(self) -> tuple[int, int] | None:
        """The last early close that speech may still go on with: (the stream
        time its pause began, its utterance's start); kept in a resume point, so
        a stream taken over right after an early final still marks its
        continuation."""
        if self._early is None or self._now_ms - self._early[0] >= self.config.min_silence_ms:
            return None
        return self._early

    @property
    def now_ms(self) -> int:
        """Stream time at the end of the last frame pushed."""
        return self._now_ms

    @property
    def in_speech(self) -> bool:
        """Whether a confirmed segment is open."""
        return self._open is not None and self._open.confirmed

    @property
    def retain_from_ms(self) -> int:
        """No event from now on reaches back before this stream time (an utterance
        an early close may go on with included)."""
        seg = self._open
        if seg is not None:
            return seg.start_ms if seg.utterance_ms is None else seg.utterance_ms
        if self._early is not None and self._now_ms - self._early[0] < self.config.min_silence_ms:
            return self._early[1]
        return max(self._last_end_ms, self._now_ms - self.config.pre_roll_ms, 0)

    def push(self, start_ms: int, probability: float) -> list[Event]:
        """Process the frame ``[start_ms, start_ms + frame_ms)``; frames come in
        order and never overlap (a gap counts as time passing). Raises
        ``ValueError`` for a frame out of order or a probability outside [0, 1]."""
        if start_ms < self._now_ms:
            raise ValueError(f"frame at {start_ms} ms comes before {self._now_ms} ms")
        if not 0.0 <= probability <= 1.0:  # also refuses NaN
            raise ValueError(f"speech probability {probability} is outside [0, 1]")
        cfg = self.config
        end_ms = self._now_ms = start_ms + cfg.frame_ms
        seg = self._open
        if seg is None:
            if probability < cfg.threshold:
                return []
            seg = self._open = self._start(start_ms)
        else:
            self._track(seg, start_ms, probability)
        if seg.pause_since_ms is not None and end_ms - seg.pause_since_ms >= cfg.min_silence_ms:
            return self._close(end_ms, "silence")
        events: list[Event] = []
        if not seg.confirmed:
            if seg.voiced_ms < cfg.min_speech_ms:
                return events
            seg.confirmed = True
            seg.next_partial_ms = self._first_partial(seg.start_ms)
            events.append(SpeechStarted(seg.start_ms))
        if end_ms - seg.start_ms >= cfg.max_segment_ms:
            events.extend(self._cut(seg, end_ms))
        events.extend(self._partial(end_ms))
        events.extend(self._likely(end_ms))
        return events

    def end_of_stream(self, end_ms: int | None = None) -> list[Event]:
        """Close the open segment at the end of the audio (``end_ms``, by
        default the end of the last frame; later when a tail shorter than a
        frame was not scored). The endpointer may then go on with later frames."""
        end = self._now_ms if end_ms is None else end_ms
        if end < self._now_ms:
            raise ValueError(f"the stream cannot end at {end} ms, before {self._now_ms} ms")
        self._now_ms = end
        if self._open is None:
            return []
        return self._close(end, "end_of_stream")

    def flush(self) -> list[Event]:
        """Close the open segment now, at the end of the last frame (reason
        ``"flush"``), or drop a candidate; the stream goes on."""
        if self._open is None:
            return []
        return self._close(self._now_ms, "flush")

    def close_early(self, start_ms: int, end_ms: int) -> list[Event]:
        """End the open segment at ``[start_ms, end_ms)``, the bounds of the
        :class:`FinalLikely` said for the pause under way, if that pause still
        goes on; otherwise (speech resumed, or the segment closed) nothing."""
        seg = self._open
        if seg is None or not seg.likely_sent or seg.pause_since_ms is None:
            return []
        if (seg.start_ms, self._speech_end(seg, self._now_ms)) != (start_ms, end_ms):
            return []
        utterance = seg.start_ms if seg.utterance_ms is None else seg.utterance_ms
        early = (seg.pause_since_ms, max(utterance, seg.start_ms - UTTERANCE_KEPT_MS))
        events = self._close(self._now_ms, "early")
        self._early = early
        return events

    def _start(self, onset_ms: int) -> _Open:
        start = max(onset_ms - self.config.pre_roll_ms, self._last_end_ms, 0)
        frame = self.config.frame_ms
        early, self._early = self._early, None
        goes_on = early is not None and onset_ms - early[0] < self.config.min_silence_ms
        return _Open(
            start_ms=start,
            voiced_ms=frame,
            voiced_since_pause_ms=frame,
            utterance_ms=early[1] if early is not None and goes_on else None,
        )

    def _track(self, seg: _Open, start_ms: int, probability: float) -> None:
        """Update the speaking/pausing state of an open segment with one frame."""
        cfg = self.config
        if seg.pause_since_ms is None:
            if probability < cfg.neg_threshold:
                seg.pause_since_ms = start_ms
                return
        elif probability >= cfg.threshold:
            seg.pause_mid_ms = (seg.pause_since_ms + start_ms) // 2
            seg.pause_since_ms = None
            seg.voiced_since_pause_ms = 0
            seg.likely_sent = False
        else:
            return
        seg.voiced_ms += cfg.frame_ms
        seg.voiced_since_pause_ms += cfg.frame_ms

    def _speech_end(self, seg: _Open, end_ms: int) -> int:
        """Padded end of a segment closed at ``end_ms``."""
        if seg.pause_since_ms is None:
            return end_ms
        padded = min(seg.pause_since_ms + self.config.post_roll_ms, end_ms)
        return max(padded, seg.start_ms)

    def _close(self, end_ms: int, reason: FinalReason) -> list[Event]:
        seg = self._open
        assert seg is not None
        self._open = None
        stop = self._speech_end(seg, end_ms)
        if not seg.confirmed:
            return [Dropped(seg.start_ms, stop)]
        events: list[Event] = []
        if seg.voiced_ms > 0 and seg.voiced_ms >= self.config.min_speech_ms:
            events.append(SegmentFinal(seg.start_ms, stop, reason, seg.utterance_ms))
            self._last_end_ms = stop
        elif stop > seg.start_ms:
            events.append(Dropped(seg.start_ms, stop))
        events.append(SpeechStopped(stop))
        return events

    def _cut(self, seg: _Open, end_ms: int) -> list[Event]:
        """Close a segment at ``max_segment_s`` and open its continuation."""
        half = seg.start_ms + self.config.max_segment_ms // 2
        voiced = 0
        if seg.pause_since_ms is not None:
            cut = self._speech_end(seg, end_ms)
        elif seg.pause_mid_ms is not None and seg.pause_mid_ms >= half:
            cut, voiced = seg.pause_mid_ms, seg.voiced_since_pause_ms
        else:
            cut = seg.start_ms + self.config.max_segment_ms
        if cut <= seg.start_ms:
            cut = end_ms
        cut = min(cut, seg.start_ms + self.config.max_segment_ms)  # the post-roll may reach past
        self._last_end_ms = cut
        self._open = _Open(
            start_ms=cut,
            voiced_ms=voiced,
            pause_since_ms=seg.pause_since_ms,
            confirmed=True,
            next_partial_ms=self._first_partial(cut),
            voiced_since_pause_ms=voiced,
        )
        return [SegmentFinal(seg.start_ms, cut, "max_length", seg.utterance_ms)]

    def _likely(self, end_ms: int) -> list[Event]:
        seg = self._open
        if seg is None or not seg.confirmed or seg.pause_since_ms is None or seg.likely_sent:
            return []
        if end_ms - seg.pause_since_ms < self.config.post_roll_ms:
            return []
        if seg.voiced_ms <= 0 or seg.voiced_ms < self.config.min_speech_ms:
            return []  # it would be dropped, not finalised
        seg.likely_sent = True
        return [FinalLikely(seg.start_ms, self._speech_end(seg, end_ms), seg.utterance_ms)]

    def _first_partial(self, start_ms: int) -> int | None:
        interval = self.config.partial_interval_ms
        return None if interval is None else start_ms + interval

    def _partial(self, end_ms: int) -> list[Event]:
        seg = self._open
        interval = self.config.partial_interval_ms
        if seg is None or seg.next_partial_ms is None or interval is None:
            return []
        if end_ms < seg.next_partial_ms:
            return []
        seg.next_partial_ms = seg.start_ms + ((end_ms - seg.start_ms) // interval + 1) * interval
        return [PartialDue(seg.start_ms, end_ms)]


def endpoint(
    probabilities: Iterable[float],
    config: EndpointConfig | None = None,
    *,
    end_ms: int | None = None,
) -> list[Event]:
    """Run a fresh :class:`Endpointer` over consecutive frames starting at 0 ms
    and end the stream (at ``end_ms``, by default after the last frame)."""
    endpointer = Endpointer(config)
    frame = endpointer.config.frame_ms
    events: list[Event] = []
    for index, probability in enumerate(probabilities):
        events.extend(endpointer.push(index * frame, probability))
    events.extend(endpointer.end_of_stream(end_ms))
    return events
