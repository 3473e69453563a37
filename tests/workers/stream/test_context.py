"""A live final is decoded with the stream's earlier finals as the decoder's
prompt (``LiveTuning.context_chars``), as a file is decoded with the text
before it: also after another worker took the stream over, bounded in length,
and never for partials.

The engine answers from the audio's length and records the prompt each decode
was given (the engine is not under test: what the session hands it is)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.workers.stream.test_session import (
    Clock,
    EnergyVad,
    OneStream,
    bursts,
    feed,
    of_type,
)
from voxwire.audio.decoding import Audio
from voxwire.workers.engine import EngineOptions, Segment, SegmentCallback
from voxwire.workers.stream.config import LiveTuning
from voxwire.workers.stream.session import Resume, StreamConfig
from voxwire.workers.transcript import prompt_context
from voxwire_client.api import RedactMode
from voxwire_client.messages import Message
from voxwire_client.options import Endpointing

pytestmark = pytest.mark.timeout(120)


class PromptedEngine:
    """Says ``"words of N ms"`` for N ms of audio; remembers each decode's prompt."""

    name = "prompted"

    def __init__(self, text: Callable[[int], str] = lambda ms: f"words of {ms} ms") -> None:
        self.text = text
        self.prompts: dict[str, str | None] = {}  # text answered -> the prompt it was given

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        text = self.text(len(audio) // 16)
        self.prompts[text] = options.initial_prompt
        return [Segment(0, len(audio) // 16, text)]

    def close(self) -> None:
        pass


EVERY_SECOND = StreamConfig(endpointing=Endpointing(partial_interval_s=1.0))


def stream(
    engine: PromptedEngine,
    out: list[Message],
    *,
    chars: int = 200,
    config: StreamConfig | None = None,
    resume: Resume | None = None,
    on_emit: Callable[[OneStream], None] | None = None,
) -> OneStream:
    sessions: list[OneStream] = []

    def emit(message: Message) -> None:
        out.append(message)
        if on_emit is not None:
            on_emit(sessions[0])

    sessions.append(
        OneStream(
            "s1", engine, EngineOptions(), config or EVERY_SECOND, (), emit,
            vad=EnergyVad(), now=Clock(), resume=resume, tuning=LiveTuning(context_chars=chars),
        )
    )  # fmt: skip
    return sessions[0]


def test_each_final_is_decoded_with_the_finals_before_it() -> None:
    engine, out = PromptedEngine(), []
    feed(stream(engine, out), bursts(), Clock())
    finals = [m.segment.text for m in of_type(out, "final")]
    assert len(finals) == 3
    assert [engine.prompts[text] for text in finals] == [
        None,
        finals[0],
        f"{finals[0]} {finals[1]}",
    ]
    partials = [m.segment.text for m in of_type(out, "partial")]
    assert partials and all(engine.prompts[text] is None for text in partials if text not in finals)


def test_the_prompt_is_the_end_of_the_finals_from_a_word_start() -> None:
    engine, out = PromptedEngine(), []
    feed(stream(engine, out, chars=20), bursts(), Clock())
    finals = [m.segment.text for m in of_type(out, "final")]
    prompt = engine.prompts[finals[2]]
    assert prompt is not None and len(prompt) <= 20
    assert f"{finals[0]} {finals[1]}".endswith(" " + prompt)
    assert prompt_context(["one two three"], 9) == "two three"
    assert prompt_context(["one two three"], 8) == "three"
    assert prompt_context(["one two", "three"], 100) == "one two three"


def test_no_prompt_when_it_is_off() -> None:
    engine, out = PromptedEngine(), []
    feed(stream(engine, out, chars=0), bursts(), Clock())
    assert len(of_type(out, "final")) == 3
    assert set(engine.prompts.values()) == {None}


def test_a_stream_taken_over_keeps_its_earlier_finals_as_the_prompt() -> None:
    engine, out = PromptedEngine(), []
    points: list[Resume] = []
    feed(stream(engine, out, on_emit=lambda s: points.append(s.resume_point())), bursts(), Clock())
    finals = [m.segment.text for m in of_type(out, "final")]
    after_two = next(i for i, m in enumerate(out) if m in of_type(out, "final")[1:2])
    successor, resumed = PromptedEngine(), []
    feed(stream(successor, resumed, resume=points[after_two]), bursts(), Clock())
    assert [m.segment.text for m in of_type(resumed, "final")] == finals[2:]
    assert successor.prompts[finals[2]] == f"{finals[0]} {finals[1]}"


def test_the_prompt_holds_what_was_delivered_not_what_redaction_hid() -> None:
    engine, out = PromptedEngine(lambda ms: f"my card is 4111 1111 1111 1111 and {ms}"), []
    config = StreamConfig(endpointing=Endpointing(partial_interval_s=1.0), redact=RedactMode.ENTITY)
    feed(stream(engine, out, config=config), bursts(), Clock())
    finals = of_type(out, "final")
    assert len(finals) == 3 and "4111" not in finals[0].segment.text
    prompts = [p for p in engine.prompts.values() if p]
    assert prompts and all("card is" in p and "4111" not in p for p in prompts)
