"""A live final decoded after the stream audio before it (``LiveTuning.lead_ms``):
the intake hands finals and likely finals their lead (never partials), within
Whisper's window, and what the engine hears in the lead stays out of the final."""

from __future__ import annotations

from pathlib import Path

import jiwer
import numpy as np
import pytest

from tests.workers.speech import LINES, conversation
from tests.workers.stream.test_session import (
    CHUNK_MS,
    Clock,
    OneStream,
    ScriptedVad,
    chunks,
    feed,
    of_type,
    tone,
)
from voxwire.workers.engine import EngineOptions, Segment, Word
from voxwire.workers.engines.faster_whisper import FasterWhisperEngine
from voxwire.workers.stream.config import LiveTuning
from voxwire.workers.stream.endpointing import EndpointConfig
from voxwire.workers.stream.intake import FinalWork, LikelyFinalWork, PartialWork, StreamIntake
from voxwire.workers.stream.lead import WINDOW_MS, after_lead, lead_ms_for
from voxwire.workers.stream.session import StreamConfig
from voxwire.workers.vad import SileroVad
from voxwire_client.messages import Message

pytestmark = pytest.mark.timeout(300)


def words(*spans: tuple[str, int, int]) -> tuple[Word, ...]:
    return tuple(Word(text, start, end, 0.9) for text, start, end in spans)


def test_only_the_words_said_after_the_lead_are_kept_with_times_from_the_segment() -> None:
    heard = [
        Segment(0, 2000, "Good morning.", words=words(("Good", 0, 900), ("morning.", 900, 2000))),
        Segment(
            2000,
            4200,
            "everyone. Thanks for coming.",
            words=words(
                ("everyone.", 2000, 2900),  # its middle (2450) lies in the lead
                ("Thanks", 3000, 3500),  # starts in the lead, its middle after the cut
                ("for", 3500, 3800),
                ("coming.", 3800, 4200),
            ),
        ),
    ]
    kept = after_lead(heard, cut_ms=3100, end_ms=1000)
    assert [s.text for s in kept] == ["Thanks for coming."]
    assert [(w.word, w.start_ms, w.end_ms) for w in kept[0].words] == [
        ("Thanks", 0, 400),
        ("for", 400, 700),
        ("coming.", 700, 1000),  # 1100 clamped to the segment's end
    ]
    assert (kept[0].start_ms, kept[0].end_ms) == (0, 1000)
    assert after_lead(heard, cut_ms=3100, end_ms=1000, words=False)[0].words == ()
    assert after_lead(heard, cut_ms=5000, end_ms=1000) == []  # all of it in the lead


def test_segments_without_words_are_kept_by_their_middle() -> None:
    heard = [Segment(0, 3000, "Before."), Segment(3000, 5000, "After.")]
    kept = after_lead(heard, cut_ms=3500, end_ms=1500)
    assert [(s.start_ms, s.end_ms, s.text) for s in kept] == [(0, 1500, "After.")]


def test_lead_and_segment_stay_within_one_window() -> None:
    assert lead_ms_for(8000, 5000) == 8000
    assert lead_ms_for(8000, 25000) == WINDOW_MS - 25000
    assert lead_ms_for(8000, WINDOW_MS) == 0
    assert lead_ms_for(0, 5000) == 0


def test_the_intake_hands_finals_their_lead_and_partials_none() -> None:
    # speech at 1-3 s and 6-8 s; the second final gets 4 s of the audio before it
    audio = tone(10.0)
    stream = StreamIntake(
        "s1", EndpointConfig(), ScriptedVad([(1000, 3000, 0.95), (6000, 8000, 0.95)]),
        lead_ms=4000,
    )  # fmt: skip
    work = []
    for index, chunk in enumerate(chunks(audio)):
        work += stream.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    finals = [w for w in work if type(w) is FinalWork]
    likely = [w for w in work if type(w) is LikelyFinalWork]
    partials = [w for w in work if type(w) is PartialWork]
    assert len(finals) == 2 and len(likely) == 2 and partials
    first, second = finals
    assert len(first.lead) == first.start_ms * 16  # all there was before it
    assert len(second.lead) == 4000 * 16
    start = (second.start_ms - 4000) * 16
    assert np.allclose(second.lead, audio[start : second.start_ms * 16], atol=1e-4)
    assert [len(w.lead) for w in likely] == [len(first.lead), len(second.lead)]
    assert all(len(w.lead) == 0 for w in partials)


def test_without_a_lead_setting_finals_come_alone() -> None:
    stream = StreamIntake("s1", EndpointConfig(), ScriptedVad([(3000, 5000, 0.95)]))
    work = []
    for index, chunk in enumerate(chunks(tone(7.0))):
        work += stream.push(index, chunk, (index + 1) * CHUNK_MS / 1000)
    assert [len(w.lead) for w in work if type(w) is FinalWork] == [0]


def _normal(text: str) -> str:
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


@pytest.mark.parametrize("lead_ms", [0, 8000])
def test_each_turn_is_one_final_with_its_own_words_only(
    engine: FasterWhisperEngine, lead_ms: int, tmp_path: Path
) -> None:
    audio, turns = conversation([0, 1, 0], tmp_path, gap_s=1.2)
    out: list[Message] = []
    session = OneStream(
        "s1", engine, EngineOptions(), StreamConfig(), (), out.append, vad=SileroVad(),
        now=Clock(), tuning=LiveTuning(lead_ms=lead_ms),
    )  # fmt: skip
    feed(session, audio, Clock())
    finals = [m.segment for m in of_type(out, "final")]
    assert len(finals) == len(turns)
    said = [_normal(line) for line in LINES[: len(turns)]]
    heard = [_normal(final.text) for final in finals]
    assert jiwer.wer(" ".join(said), " ".join(heard)) <= 0.35, heard
    for final, line, text, before in zip(finals, said, heard, ["", *said], strict=False):
        assert not before or " ".join(before.split()[-2:]) not in text  # none of the turn before
        assert text.split()[-1] == line.split()[-1]  # nor cut short
        assert final.words and final.words[0].start_ms >= final.start_ms
        assert final.words[-1].end_ms <= final.end_ms
