"""The file-job pipeline against a scripted engine (the engine is not under test)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from voxwire.audio.decoding import Audio
from voxwire.core.errors import EngineError
from voxwire.wire.records import FileJob
from voxwire.workers.engine import EngineOptions, Segment, SegmentCallback, Word
from voxwire.workers.files.job import run_file_job
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import Message, SegmentMessage, TranscriptMessage


class ScriptedEngine:
    name = "scripted"

    def __init__(self, segments: list[Segment], fail: bool = False) -> None:
        self.segments = segments
        self.fail = fail

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        for segment in self.segments:
            if on_segment:
                on_segment(segment)
        if self.fail:
            raise EngineError("boom", hint="retry")
        return self.segments

    def close(self) -> None:
        pass


JOB = FileJob(
    sid="s1",
    tenant_id="t",
    audio_key="s1/audio.pcm",
    duration_ms=10_000,
    model="tiny.en",
    prompts=(PromptSpec(id="p1", text="twelve percent"),),
)
AUDIO = np.zeros(16000, dtype=np.float32)


def _run(engine: ScriptedEngine) -> list[Message]:
    out: list[Message] = []
    run_file_job(JOB, AUDIO, engine, EngineOptions(), out.append)
    return out


def test_messages_in_order_with_progress_matches_and_transcript() -> None:
    engine = ScriptedEngine(
        [Segment(0, 4000, " Rates rose 12% today."), Segment(4000, 10_000, " Nothing else.")]
    )
    out = _run(engine)
    assert [m.seq for m in out] == list(range(2, 2 + len(out)))
    types = [m.type for m in out]
    assert types == [
        "progress",
        "final",
        "match",
        "progress",
        "final",
        "progress",
        "transcript",
        "progress",
    ]
    percents = [m.percent for m in out if m.type == "progress"]
    assert percents == [0, 40, 99, 100]
    assert out[-2].text == "Rates rose 12% today. Nothing else."  # type: ignore[union-attr]
    match = out[2]
    assert match.prompt_id == "p1" and match.segment_ids == ("s1-0",)  # type: ignore[union-attr]


def test_redelivery_produces_the_same_seqs() -> None:
    engine = ScriptedEngine([Segment(0, 4000, "a"), Segment(4000, 8000, "b")])
    first, second = _run(engine), _run(engine)
    assert [(m.seq, m.type) for m in first] == [(m.seq, m.type) for m in second]


def test_engine_failure_becomes_an_error_message() -> None:
    out = _run(ScriptedEngine([Segment(0, 1000, "a")], fail=True))
    assert out[-1].type == "error"
    assert out[-1].code == "engine" and out[-1].hint == "retry"  # type: ignore[union-attr]


class BrokenEngine(ScriptedEngine):
    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        raise RuntimeError("segfault avoided")


def test_unexpected_engine_failure_still_ends_the_session() -> None:
    out = _run(BrokenEngine([]))
    assert out[-1].type == "error"
    assert out[-1].code == "internal" and out[-1].fatal  # type: ignore[union-attr]


def test_a_redacting_job_never_emits_what_it_redacts() -> None:
    """Finals, matches and the transcript all carry the redacted text."""
    job = JOB.model_copy(
        update={"redact": RedactMode.ENTITY, "prompts": (PromptSpec(id="c", text="my card"),)}
    )
    engine = ScriptedEngine(
        [Segment(0, 4000, " My card is 4111 1111 1111 1111."),
         Segment(4000, 9000, " Mail jane dot doe at example dot com.")]
    )  # fmt: skip
    out: list[Message] = []
    run_file_job(job, AUDIO, engine, EngineOptions(), out.append)
    dumped = " ".join(m.model_dump_json() for m in out)
    assert "4111" not in dumped and "jane" not in dumped
    (transcript,) = [m for m in out if isinstance(m, TranscriptMessage)]
    assert transcript.text == "My card is [CREDIT_CARD]. Mail [EMAIL_ADDRESS]."
    assert [m.type for m in out].count("match") == 1


def test_a_card_number_answering_the_segment_before_is_redacted() -> None:
    """The agent's question ends one segment, the caller's comma-grouped card
    number is the next: neither the delivered final (text and words) nor the
    transcript holds a digit of it."""
    job = JOB.model_copy(update={"redact": RedactMode.ENTITY, "prompts": ()})
    answer = " Yes, it is 4,111,111,111,111,111,111,"
    said = answer.split()
    words = tuple(Word(f" {w}", 5000 + 500 * n, 5400 + 500 * n, 0.9) for n, w in enumerate(said))
    engine = ScriptedEngine(
        [Segment(0, 4000, " Can you confirm the card number on the account?"),
         Segment(5000, 9000, answer, words=words)]
    )  # fmt: skip
    out: list[Message] = []
    run_file_job(job, AUDIO, engine, EngineOptions(), out.append)
    finals = [m for m in out if isinstance(m, SegmentMessage) and m.type == "final"]
    assert finals[1].segment.text == "Yes, it is [ACCOUNT_NUMBER],"
    assert finals[1].segment.words
    assert not any(c.isdigit() for w in finals[1].segment.words for c in w.word)
    (transcript,) = [m for m in out if isinstance(m, TranscriptMessage)]
    assert transcript.text == "Can you confirm the card number on the account? " + (
        "Yes, it is [ACCOUNT_NUMBER],"
    )
    dumped = " ".join(m.model_dump_json(exclude={"ts"}) for m in out)  # a time may hold 111
    assert "111" not in dumped
