"""The endpointing state machine on synthetic probability sequences.

Frames are 32 ms; a sequence is written as runs of ``(probability, frames)``.
With the defaults a segment starts 200 ms before its first speech frame and
ends 200 ms after its last one.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxwire.core.errors import ConfigError
from voxwire.workers.stream.endpointing import (
    Dropped,
    EndpointConfig,
    Endpointer,
    Event,
    FinalLikely,
    PartialDue,
    SegmentFinal,
    SpeechStarted,
    SpeechStopped,
    endpoint,
)
from voxwire_client.options import Endpointing, EndpointingPolicy

pytestmark = pytest.mark.timeout(60)

E = TypeVar("E")
F = 32  # ms per frame
SPEECH, QUIET = 0.9, 0.05


def runs(*parts: tuple[float, int]) -> list[float]:
    """Probabilities from runs of (probability, number of frames)."""
    return [p for p, n in parts for _ in range(n)]


def of(kind: type[E], events: list[Event]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def feed(endpointer: Endpointer, probabilities: list[float], first_frame: int = 0) -> list[Event]:
    events: list[Event] = []
    for i, p in enumerate(probabilities, start=first_frame):
        events += endpointer.push(i * F, p)
    return events


@pytest.fixture
def config() -> EndpointConfig:
    return EndpointConfig()


# --- start ---------------------------------------------------------------------------------


def test_silence_and_noise_give_no_events(config: EndpointConfig) -> None:
    assert endpoint(runs((0.0, 300), (0.3, 300), (0.49, 50)), config) == []


def test_speech_starts_after_min_speech_with_pre_roll(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    assert feed(endpointer, runs((QUIET, 40), (SPEECH, 7))) == []  # 224 ms voiced: a candidate
    assert not endpointer.in_speech
    # The 8th speech frame brings 256 ms >= 250 ms: confirmed, dated from the onset (1280 ms).
    assert endpointer.push(47 * F, SPEECH) == [SpeechStarted(1280 - 200)]
    assert endpointer.in_speech


def test_pre_roll_is_clamped_at_zero(config: EndpointConfig) -> None:
    events = endpoint(runs((QUIET, 2), (SPEECH, 20)), config)
    assert events[0] == SpeechStarted(0)
    assert events[1] == SegmentFinal(0, 22 * F, "end_of_stream")


def test_pre_roll_is_clamped_at_the_previous_segment_end() -> None:
    cfg = EndpointConfig(min_silence_ms=224)  # 7 frames
    events = endpoint(runs((SPEECH, 50), (QUIET, 7), (SPEECH, 20)), cfg)
    first, second = of(SegmentFinal, events)
    assert first == SegmentFinal(0, 1600 + 200, "silence")
    # The second onset is at 1824 ms; 200 ms of pre-roll would reach back into the first.
    assert second.start_ms == first.end_ms == 1800
    assert of(SpeechStarted, events) == [SpeechStarted(0), SpeechStarted(1800)]


# --- final after silence -------------------------------------------------------------------


def test_final_after_min_silence(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    events = feed(endpointer, runs((QUIET, 40), (SPEECH, 50), (QUIET, 18)))
    assert of(SegmentFinal, events) == []  # 18 frames = 576 ms < 600 ms
    closing = endpointer.push(108 * F, QUIET)  # 608 ms of silence
    speech_end = 90 * F
    assert closing == [
        SegmentFinal(1280 - 200, speech_end + 200, "silence"),
        SpeechStopped(speech_end + 200),
    ]
    assert not endpointer.in_speech


def test_a_pause_shorter_than_min_silence_continues_the_segment(config: EndpointConfig) -> None:
    events = endpoint(runs((SPEECH, 30), (QUIET, 18), (SPEECH, 30), (QUIET, 30)), config)
    assert of(SegmentFinal, events) == [SegmentFinal(0, 78 * F + 200, "silence")]
    assert len(of(SpeechStarted, events)) == len(of(SpeechStopped, events)) == 1


def test_post_roll_is_clamped_to_the_audio_seen() -> None:
    cfg = EndpointConfig(min_silence_ms=96, pre_roll_ms=0, post_roll_ms=300)
    events = endpoint(runs((SPEECH, 20), (QUIET, 3)), cfg)
    assert of(SegmentFinal, events) == [SegmentFinal(0, 23 * F, "silence")]


# --- micro-sounds --------------------------------------------------------------------------


def test_short_blip_is_dropped(config: EndpointConfig) -> None:
    events = endpoint(runs((QUIET, 40), (SPEECH, 5), (QUIET, 40)), config)
    blip_end = 45 * F
    assert events == [Dropped(1280 - 200, blip_end + 200)]


def test_blips_count_voiced_time_not_span(config: EndpointConfig) -> None:
    # Four 96 ms clicks 480 ms apart: a 1.5 s span but 384 ms voiced, confirmed on the third.
    clicks = runs(*[(SPEECH, 3), (QUIET, 15)] * 4, (QUIET, 30))
    events = endpoint(clicks, config)
    assert of(SpeechStarted, events) == [SpeechStarted(0)]
    # Two clicks only (192 ms voiced): dropped.
    two = endpoint(runs((SPEECH, 3), (QUIET, 15), (SPEECH, 3), (QUIET, 30)), config)
    assert two == [Dropped(0, 21 * F + 200)]


def test_min_speech_zero_starts_on_the_first_speech_frame() -> None:
    events = endpoint(runs((QUIET, 10), (SPEECH, 1), (QUIET, 30)), EndpointConfig(min_speech_ms=0))
    assert events[0] == SpeechStarted(320 - 200)
    assert of(SegmentFinal, events) == [SegmentFinal(120, 352 + 200, "silence")]


# --- partials ------------------------------------------------------------------------------


def test_partials_every_interval_of_segment_audio(config: EndpointConfig) -> None:
    events = endpoint(runs((QUIET, 40), (SPEECH, 300), (QUIET, 30)), config)
    partials = of(PartialDue, events)
    start = 1280 - 200
    assert all(p.start_ms == start for p in partials)
    ends = [p.end_ms for p in partials]
    # Due when the segment (from its padded start) reaches 2 s, 4 s, ...: the first frame end
    # at or after it. Frames end at 1280 + 32 k ms.
    assert ends[0] == 3104 and ends[1] == 5088
    assert [(e - start) // 2000 for e in ends] == list(range(1, len(ends) + 1))
    assert all(0 <= (e - start) % 2000 < F for e in ends)  # no drift
    # Partials go on in the final pause: the final comes at 10880 + 608 ms.
    assert ends[-1] == 11104 and len(ends) == 5
    # Every partial comes after SpeechStarted and before the final.
    kinds = [type(e) for e in events]
    assert kinds[0] is SpeechStarted and kinds[-2:] == [SegmentFinal, SpeechStopped]


def test_partials_can_be_turned_off() -> None:
    cfg = EndpointConfig(partial_interval_s=0)
    assert cfg.partial_interval_ms is None
    assert of(PartialDue, endpoint(runs((SPEECH, 300)), cfg)) == []


def test_partials_go_on_during_a_short_pause(config: EndpointConfig) -> None:
    # Speech 0-1984 ms then a pause: the 2 s partial falls inside the pause, before the final.
    events = endpoint(runs((SPEECH, 62), (QUIET, 30)), config)
    kinds = [SpeechStarted, PartialDue, FinalLikely, SegmentFinal, SpeechStopped]
    assert [type(e) for e in events] == kinds
    assert events[1] == PartialDue(0, 2016)


# --- early finals ----------------------------------------------------------------------------


def test_final_likely_comes_once_per_pause_with_the_final_s_bounds(config: EndpointConfig) -> None:
    # speech, a 320 ms pause (no final), speech, then silence: two FinalLikely, one final
    events = endpoint(runs((SPEECH, 40), (QUIET, 10), (SPEECH, 20), (QUIET, 30)), config)
    likely, (final,) = of(FinalLikely, events), of(SegmentFinal, events)
    assert len(likely) == 2
    assert (likely[-1].start_ms, likely[-1].end_ms) == (final.start_ms, final.end_ms)
    assert events.index(likely[-1]) < events.index(final)
    assert likely[0].end_ms == 40 * 32 + config.post_roll_ms  # the first pause's would-be end


def test_final_likely_waits_for_the_post_roll_and_skips_drops(config: EndpointConfig) -> None:
    seven = endpoint(runs((SPEECH, 40), (QUIET, 6)), config)  # 192 ms of pause
    assert of(FinalLikely, seven) == []
    assert of(FinalLikely, endpoint(runs((SPEECH, 40), (QUIET, 7)), config)) != []
    assert of(FinalLikely, endpoint(runs((SPEECH, 3), (QUIET, 30)), config)) == []  # a blip


# --- early close (policy fast) ------------------------------------------------------------


def likely_after(endpointer: Endpointer, parts: list[float]) -> FinalLikely:
    (likely,) = of(FinalLikely, feed(endpointer, parts))
    return likely


def test_an_early_close_ends_the_segment_at_the_likely_bounds(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    likely = likely_after(endpointer, runs((SPEECH, 40), (QUIET, 8)))
    events = endpointer.close_early(likely.start_ms, likely.end_ms)
    assert events == [
        SegmentFinal(likely.start_ms, likely.end_ms, "early"),
        SpeechStopped(likely.end_ms),
    ]
    assert not endpointer.in_speech
    # the rest of the pause gives nothing more: no second final for the same speech
    assert of(SegmentFinal, feed(endpointer, runs((QUIET, 40)), first_frame=48)) == []


def test_the_fast_policy_decodes_its_likely_final_sooner_into_a_pause() -> None:
    fast = EndpointConfig.of(Endpointing(policy=EndpointingPolicy.FAST))
    assert (fast.post_roll_ms, EndpointConfig.of(Endpointing()).post_roll_ms) == (128, 200)
    (likely,) = of(FinalLikely, endpoint(runs((SPEECH, 40), (QUIET, 4)), fast))
    assert likely.end_ms == 40 * F + 128  # four frames into the pause


def test_speech_within_min_silence_of_an_early_close_continues_it(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    likely = likely_after(endpointer, runs((SPEECH, 40), (QUIET, 8)))
    endpointer.close_early(likely.start_ms, likely.end_ms)
    # the pause began at frame 40; speech again at frame 50 (320 ms < 600 ms)
    events = feed(endpointer, runs((QUIET, 2), (SPEECH, 20), (QUIET, 30)), first_frame=48)
    (final,) = of(SegmentFinal, events)
    assert final.continues and final.reason == "silence"
    assert final.start_ms == likely.end_ms  # clamped at the early final's end: no overlap
    assert final.utterance_ms == likely.start_ms  # decoded after the early final's audio


def test_the_audio_of_an_utterance_that_may_go_on_is_kept(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    likely = likely_after(endpointer, runs((SPEECH, 40), (QUIET, 8)))
    endpointer.close_early(likely.start_ms, likely.end_ms)
    assert endpointer.retain_from_ms == likely.start_ms  # within min_silence_ms of the pause
    feed(endpointer, runs((QUIET, 2), (SPEECH, 10)), first_frame=48)
    assert endpointer.retain_from_ms == likely.start_ms  # the continuation's lead
    feed(endpointer, runs((QUIET, 30)), first_frame=60)
    assert endpointer.retain_from_ms > likely.end_ms  # closed: let go


def test_speech_after_min_silence_is_a_new_utterance(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    likely = likely_after(endpointer, runs((SPEECH, 40), (QUIET, 8)))
    endpointer.close_early(likely.start_ms, likely.end_ms)
    events = feed(endpointer, runs((QUIET, 20), (SPEECH, 20), (QUIET, 30)), first_frame=48)
    (final,) = of(SegmentFinal, events)
    assert not final.continues


def test_no_early_close_once_speech_resumed_or_for_other_bounds(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    likely = likely_after(endpointer, runs((SPEECH, 40), (QUIET, 8)))
    assert endpointer.close_early(likely.start_ms, likely.end_ms + 32) == []
    feed(endpointer, runs((SPEECH, 5)), first_frame=48)  # the decode came back too late
    assert endpointer.close_early(likely.start_ms, likely.end_ms) == []
    events = feed(endpointer, runs((QUIET, 30)), first_frame=53)
    (final,) = of(SegmentFinal, events)
    assert (final.start_ms, final.reason, final.continues) == (likely.start_ms, "silence", False)
    assert endpointer.close_early(final.start_ms, final.end_ms) == []  # closed already


# --- forced final at max_segment_s ---------------------------------------------------------


def test_forced_final_at_max_length_continues_seamlessly() -> None:
    cfg = EndpointConfig(max_segment_s=5.0)
    events = endpoint(runs((SPEECH, 400), (QUIET, 30)), cfg)  # 12.8 s of speech
    finals = of(SegmentFinal, events)
    assert finals == [
        SegmentFinal(0, 5000, "max_length"),
        SegmentFinal(5000, 10000, "max_length"),
        SegmentFinal(10000, 12800 + 200, "silence"),
    ]
    assert of(SpeechStarted, events) == [SpeechStarted(0)]
    assert of(SpeechStopped, events) == [SpeechStopped(13000)]
    # Partials restart with each segment.
    starts = {p.start_ms for p in of(PartialDue, events)}
    assert starts == {0, 5000, 10000}


def test_forced_final_cuts_at_a_recent_pause() -> None:
    cfg = EndpointConfig(max_segment_s=5.0, partial_interval_s=0)
    # Speech to 3200 ms, a 192 ms pause (too short to end the segment), speech again.
    events = endpoint(runs((SPEECH, 100), (0.2, 6), (SPEECH, 100)), cfg)
    finals = of(SegmentFinal, events)
    assert finals[0] == SegmentFinal(0, (3200 + 3392) // 2, "max_length")
    assert finals[1].start_ms == finals[0].end_ms


def test_forced_final_ignores_a_pause_in_the_first_half() -> None:
    cfg = EndpointConfig(max_segment_s=5.0, partial_interval_s=0)
    events = endpoint(runs((SPEECH, 30), (0.2, 6), (SPEECH, 200)), cfg)
    assert of(SegmentFinal, events)[0] == SegmentFinal(0, 5000, "max_length")


def test_forced_final_during_a_pause_cuts_after_the_post_roll() -> None:
    cfg = EndpointConfig(max_segment_s=5.0, partial_interval_s=0)
    # Speech to 4800 ms, then silence: the segment reaches 5 s 224 ms into the pause.
    events = endpoint(runs((SPEECH, 150), (QUIET, 40)), cfg)
    assert events == [
        SpeechStarted(0),
        SegmentFinal(0, 5000, "max_length"),
        # The continuation holds nothing but silence: no second final, no text.
        SpeechStopped(5000),
    ]


def test_continuation_under_min_speech_is_dropped() -> None:
    cfg = EndpointConfig(max_segment_s=5.0, partial_interval_s=0, post_roll_ms=0)
    # Speech to 5024 ms: cut at exactly 5 s, then 24 ms of voice and silence.
    events = endpoint(runs((SPEECH, 157), (QUIET, 30)), cfg)
    assert events == [
        SpeechStarted(0),
        SegmentFinal(0, 5000, "max_length"),
        Dropped(5000, 5024),
        SpeechStopped(5024),
    ]
    # 5.2 s of speech: the 200 ms after the cut (6 voiced frames) are under min_speech_ms.
    events = endpoint(runs((SPEECH, 163), (QUIET, 30)), cfg)
    assert of(Dropped, events) == [Dropped(5000, 5216)]
    # 5.4 s: 12 voiced frames, a final of its own.
    events = endpoint(runs((SPEECH, 169), (QUIET, 30)), cfg)
    assert of(SegmentFinal, events)[1] == SegmentFinal(5000, 5408, "silence")


# --- end of stream -------------------------------------------------------------------------


def test_end_of_stream_closes_an_open_segment(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    feed(endpointer, runs((QUIET, 10), (SPEECH, 30)))
    assert endpointer.end_of_stream(1300) == [
        SegmentFinal(120, 1300, "end_of_stream"),
        SpeechStopped(1300),
    ]
    assert endpointer.end_of_stream() == []  # nothing open any more


def test_end_of_stream_during_a_pause_keeps_the_post_roll(config: EndpointConfig) -> None:
    events = endpoint(runs((SPEECH, 30), (QUIET, 10)), config)
    assert events[-2:] == [SegmentFinal(0, 960 + 200, "end_of_stream"), SpeechStopped(1160)]


def test_end_of_stream_drops_a_candidate(config: EndpointConfig) -> None:
    assert endpoint(runs((QUIET, 10), (SPEECH, 4)), config) == [Dropped(120, 448)]


def test_end_of_stream_before_the_last_frame_is_refused(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    feed(endpointer, runs((SPEECH, 30)))
    with pytest.raises(ValueError, match="before"):
        endpointer.end_of_stream(900)


def test_the_stream_can_go_on_after_end_of_stream(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    first = feed(endpointer, runs((SPEECH, 30))) + endpointer.end_of_stream()
    second = feed(endpointer, runs((SPEECH, 30)), first_frame=40) + endpointer.end_of_stream()
    assert of(SegmentFinal, first) == [SegmentFinal(0, 960, "end_of_stream")]
    assert of(SegmentFinal, second) == [SegmentFinal(1280 - 200, 2240, "end_of_stream")]


# --- hysteresis ----------------------------------------------------------------------------


def test_hysteresis_keeps_speech_between_the_thresholds(config: EndpointConfig) -> None:
    assert config.neg_threshold == pytest.approx(0.35)
    # 0.4 never starts speech ...
    assert endpoint(runs((0.4, 100)), config) == []
    # ... but keeps it going: 3 s at 0.4 after speech is one segment, voiced throughout.
    events = endpoint(runs((SPEECH, 10), (0.4, 100), (0.3, 30)), config)
    assert of(SegmentFinal, events) == [SegmentFinal(0, 110 * F + 200, "silence")]


def test_a_pause_needs_threshold_not_neg_threshold_to_resume(config: EndpointConfig) -> None:
    # After speech falls below 0.35, frames at 0.45 do not resume it: the final comes on time.
    events = endpoint(runs((SPEECH, 20), (0.2, 5), (0.45, 14), (0.45, 10)), config)
    assert of(SegmentFinal, events) == [SegmentFinal(0, 640 + 200, "silence")]
    assert events[-1] == SpeechStopped(840)


def test_threshold_is_configurable() -> None:
    cfg = EndpointConfig(threshold=0.7)
    assert cfg.neg_threshold == pytest.approx(0.55)
    assert endpoint(runs((0.65, 50)), cfg) == []
    events = endpoint(runs((0.8, 10), (0.6, 50), (0.5, 30)), cfg)
    assert of(SegmentFinal, events) == [SegmentFinal(0, 60 * F + 200, "silence")]


# --- time, buffers, validation -------------------------------------------------------------


def test_a_gap_in_stream_time_counts_as_time(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    feed(endpointer, runs((SPEECH, 20)))
    endpointer.push(640, QUIET)  # the pause starts at 640 ms
    assert endpointer.push(10_000, QUIET) == [
        SegmentFinal(0, 840, "silence"),
        SpeechStopped(840),
    ]


def test_retain_from_ms_follows_the_open_segment(config: EndpointConfig) -> None:
    endpointer = Endpointer(config)
    feed(endpointer, runs((QUIET, 40)))
    assert endpointer.retain_from_ms == 1280 - 200  # the pre-roll of a segment starting next
    feed(endpointer, runs((SPEECH, 100)), first_frame=40)
    assert endpointer.retain_from_ms == 1080  # the open segment's start
    feed(endpointer, runs((QUIET, 40)), first_frame=140)
    assert endpointer.retain_from_ms == 180 * F - 200


@pytest.mark.parametrize(
    ("start_ms", "probability"),
    [(-32, 0.5), (0, float("nan")), (0, 1.5), (0, -0.1)],
)
def test_bad_frames_are_refused(start_ms: int, probability: float) -> None:
    with pytest.raises(ValueError):
        Endpointer().push(start_ms, probability)


def test_frames_out_of_order_are_refused() -> None:
    endpointer = Endpointer()
    endpointer.push(64, 0.1)
    with pytest.raises(ValueError, match="before"):
        endpointer.push(32, 0.1)


@pytest.mark.parametrize(
    "changes",
    [
        {"threshold": 0.0},
        {"threshold": 1.0},
        {"threshold": float("nan")},
        {"hysteresis": -0.1},
        {"min_silence_ms": 10},
        {"min_speech_ms": -1},
        {"pre_roll_ms": -1},
        {"post_roll_ms": -5},
        {"partial_interval_s": -1.0},
        {"partial_interval_s": float("inf")},
        {"max_segment_s": 1.0},
        {"max_segment_s": float("inf")},
        {"frame_ms": 0},
    ],
)
def test_bad_config_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(changes))):
        dataclasses.replace(EndpointConfig(), **changes)


def test_neg_threshold_has_a_floor() -> None:
    assert EndpointConfig(threshold=0.1).neg_threshold == pytest.approx(0.01)


# --- invariants on random sequences --------------------------------------------------------

probability_runs = st.lists(
    st.tuples(st.sampled_from([0.0, 0.2, 0.4, 0.6, 0.95]), st.integers(1, 60)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(parts=probability_runs, max_segment_s=st.sampled_from([3.2, 30.0]))
def test_invariants(parts: list[tuple[float, int]], max_segment_s: float) -> None:
    cfg = EndpointConfig(max_segment_s=max_segment_s, partial_interval_s=1.0)
    probabilities = runs(*parts)
    end = len(probabilities) * F
    events = endpoint(probabilities, cfg)
    closed: list[SegmentFinal | Dropped] = [
        e for e in events if isinstance(e, SegmentFinal | Dropped)
    ]
    finals = of(SegmentFinal, events)
    # Bounds are ordered, inside the stream, and segments never overlap.
    for seg in closed:
        assert 0 <= seg.start_ms <= seg.end_ms <= end
    for a, b in itertools.pairwise(finals):
        assert a.end_ms <= b.start_ms
    for final in finals:
        assert 0 < final.end_ms - final.start_ms <= cfg.max_segment_ms
    # SpeechStarted and SpeechStopped alternate, and every turn is closed.
    turns = [type(e) for e in events if isinstance(e, SpeechStarted | SpeechStopped)]
    assert turns == [SpeechStarted, SpeechStopped] * (len(turns) // 2)
    # Partials and finals only inside a turn; a partial covers at least one interval of
    # its segment; after a forced final the turn goes on exactly where it ended.
    in_turn, cut = False, None
    for event in events:
        if isinstance(event, SpeechStarted | SpeechStopped):
            in_turn, cut = isinstance(event, SpeechStarted), None
            continue
        if isinstance(event, PartialDue | SegmentFinal):
            assert in_turn
        if isinstance(event, PartialDue):
            assert event.end_ms - event.start_ms >= 1000
        if cut is not None:
            assert event.start_ms == cut
        if isinstance(event, SegmentFinal) and event.reason == "max_length":
            cut = event.end_ms
    # No speech in, no speech out.
    if all(p < cfg.threshold for p in probabilities):
        assert events == []
