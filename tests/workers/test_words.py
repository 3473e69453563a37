"""Word times and confidence: from both engines on real recordings, into the
finals the transcript builder makes (offset, redacted, used by matches)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation.corpus import UTTERANCES, eval_items, normalize
from tests.models.conftest import jfk_audio
from voxwire.audio.decoding import decode
from voxwire.workers.engine import Engine, EngineOptions, Segment, Word
from voxwire.workers.engines import create_engine
from voxwire.workers.transcript import TranscriptBuilder, words_of
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import MatchMessage, SegmentMessage, WordData

pytestmark = pytest.mark.timeout(600)
OPTIONS = EngineOptions(language="en", threads=2)


@pytest.fixture(scope="module", params=["faster-whisper", "whispercpp"])
def engine(request: pytest.FixtureRequest, model_path: Path) -> Iterator[Engine]:
    loaded = create_engine(
        request.param, "tiny.en" if request.param == "faster-whisper" else model_path
    )
    yield loaded
    loaded.close()


def _check_words(segment: Segment) -> None:
    words = segment.words
    assert words, f"no words for {segment.text!r}"
    assert normalize(" ".join(w.word for w in words)) == normalize(segment.text)
    previous_end = segment.start_ms
    for word in words:
        assert segment.start_ms <= word.start_ms <= word.end_ms <= segment.end_ms, (word, segment)
        assert word.start_ms >= previous_end, f"{word} starts before the word before it ends"
        assert 0 <= word.probability <= 1
        previous_end = word.end_ms
    timed = sum(w.end_ms > w.start_ms for w in words)
    assert timed >= 0.7 * len(words), f"most words take time: {words}"
    spread = words[-1].end_ms - words[0].start_ms
    assert spread >= 0.5 * (segment.end_ms - segment.start_ms), "the words span the segment"


def test_word_times_lie_inside_their_segments_in_order(engine: Engine) -> None:
    wanted = {*UTTERANCES[:4], "whisper_jfk"}
    items = [i for i in eval_items() if i.id in wanted]
    assert len(items) == len(wanted)
    for item in items:
        audio = decode(item.path.read_bytes(), max_seconds=120).samples
        segments = engine.transcribe(audio, OPTIONS)
        assert segments, item.id
        for segment in segments:
            _check_words(segment)


def test_jfk_words_are_where_they_are_said(engine: Engine) -> None:
    words = [w for s in engine.transcribe(jfk_audio(), OPTIONS) for w in s.words]
    spoken = [normalize(w.word) for w in words]
    not_ = words[spoken.index("not")]
    country = words[len(spoken) - 1 - spoken[::-1].index("country")]
    assert 3_300 <= not_.start_ms <= 4_700, not_  # "ask not" is said from about 3.3 s
    assert 9_500 <= country.start_ms <= 10_800, country  # the last word
    assert min(w.probability for w in words if normalize(w.word) == "fellow") > 0.5


def test_no_words_when_not_asked_for(engine: Engine) -> None:
    segments = engine.transcribe(jfk_audio(), EngineOptions(language="en", word_timestamps=False))
    assert segments and all(s.words == () for s in segments)


# --- into the finals ---------------------------------------------------------------------------


def _word_list(text: str, start_ms: int = 0, step: int = 400) -> tuple[Word, ...]:
    return tuple(
        Word(w, start_ms + i * step, start_ms + (i + 1) * step - 50, 0.9)
        for i, w in enumerate(text.split())
    )


def _final(messages: list) -> SegmentMessage:  # type: ignore[type-arg]
    final = messages[0]
    assert isinstance(final, SegmentMessage) and final.type == "final"
    return final


def test_a_live_final_carries_its_words_on_the_stream_timeline() -> None:
    clip = Segment(0, 2_000, "ask not what", words=_word_list("ask not what"))
    words = words_of([clip], offset_ms=61_000)  # the clip starts 61 s into the stream
    assert [(w.word, w.start_ms, w.end_ms) for w in words] == [
        ("ask", 61_000, 61_350),
        ("not", 61_400, 61_750),
        ("what", 61_800, 62_150),
    ]
    builder = TranscriptBuilder("s1", language="en")
    final = _final(builder.final(61_000, 63_000, "ask not what", words=words))
    assert final.segment.words == words
    assert builder.transcript(63_000).segments[0].words == words


def test_a_match_takes_the_times_of_its_words() -> None:
    text = "And so my fellow Americans ask not"
    words = words_of([Segment(0, 3_000, text, words=_word_list(text, 100))])
    builder = TranscriptBuilder(
        "s1", language="en", prompts=(PromptSpec(id="p", text="fellow americans"),)
    )
    _final_message, match = builder.final(0, 3_000, text, words=words)
    assert isinstance(match, MatchMessage)
    assert (match.start_ms, match.end_ms) == (words[3].start_ms, words[4].end_ms) == (1_300, 2_050)
    # without words: estimated from the characters' place in the segment
    builder = TranscriptBuilder(
        "s2", language="en", prompts=(PromptSpec(id="p", text="fellow americans"),)
    )
    _final_message, match = builder.final(0, 3_000, text)
    assert isinstance(match, MatchMessage) and (match.start_ms, match.end_ms) != (1_300, 2_050)


CARD = "4111 1111 1111 1111"
SPOKEN = "four one one one one one one one one one one one one one one one"


@pytest.mark.parametrize("said", [CARD, SPOKEN])
@pytest.mark.parametrize("mode", [RedactMode.MASK, RedactMode.ENTITY, RedactMode.NUMBERS])
def test_redacted_words_never_leak(said: str, mode: RedactMode) -> None:
    text = f"my card number is {said} thanks"
    words = words_of([Segment(0, 20_000, text, words=_word_list(text))])
    builder = TranscriptBuilder("s1", language="en", redact=mode)
    segment = _final(builder.final(0, 20_000, text, words=words)).segment
    said_words = set(said.split())
    assert not said_words & set(segment.text.split())
    assert not said_words & {w.word for w in segment.words}, segment.words
    assert not any(ch.isdigit() for w in segment.words for ch in w.word)
    assert [w.word for w in segment.words[:4]] == ["my", "card", "number", "is"]
    assert segment.words[-1].word == "thanks"
    if mode is not RedactMode.MASK:
        card = [w for w in segment.words if w.word == "[CREDIT_CARD]"]
        assert len(card) == 1 and "[CREDIT_CARD]" in segment.text
        first, last = words[4], words[-2]  # the span's first and last words
        assert (card[0].start_ms, card[0].end_ms) == (first.start_ms, last.end_ms)
    else:
        masked = segment.words[4:-1]
        assert len(masked) == len(said.split()) and all(set(w.word) == {"*"} for w in masked)
    assert builder.transcript(20_000).segments[0].words == segment.words


def test_a_word_the_text_does_not_hold_is_masked_when_anything_is_redacted() -> None:
    text = f"call me on {CARD}"
    words = (*words_of([Segment(0, 9_000, text, words=_word_list(text))]),)
    odd = WordData(word="4111-1111", start_ms=8_000, end_ms=8_500, probability=0.5)
    builder = TranscriptBuilder("s1", language="en", redact=RedactMode.MASK)
    segment = _final(builder.final(0, 9_000, text, words=(*words, odd))).segment
    assert segment.words[-1].word == "****-****"


def test_the_words_of_a_number_split_over_two_finals_are_redacted_in_both() -> None:
    builder = TranscriptBuilder("s1", language="en", redact=RedactMode.ENTITY)
    first, second = "my card number is 4111 1111", "1111 1111"
    for start, text in ((0, first), (5_000, second)):
        words = words_of([Segment(0, 4_000, text, words=_word_list(text))], offset_ms=start)
        segment = _final(builder.final(start, start + 4_000, text, words=words)).segment
        assert not any(ch.isdigit() for w in segment.words for ch in w.word), segment.words
        assert not any(ch.isdigit() for ch in segment.text), segment.text
