"""The loop rule on texts: what loops, what is speech, and how a loop is cut."""

from __future__ import annotations

import math

from voxwire.workers.loops import (
    LOOP_RATIO,
    compression_ratio,
    confidence,
    cut_repeats,
    loops,
    repeated_run,
    words_of,
)

LOOPED = "There's nothing going on for the orange. " * 8


def test_a_sentence_said_again_and_again_loops() -> None:
    assert compression_ratio(LOOPED) > LOOP_RATIO
    assert loops(LOOPED)


def test_a_short_phrase_looped_is_caught_by_its_run_not_its_ratio() -> None:
    text = "In 1813, in 1813, in 1813, in 1813, in 1813, it was the first"
    assert compression_ratio(text) < LOOP_RATIO
    run = repeated_run(words_of(text))
    assert run is not None and (run.size, run.times) == (2, 5)
    assert loops(text)


def test_speech_with_a_few_repeats_does_not_loop() -> None:
    for text in (
        "No, no, no, I said Tuesday.",
        "Thank you. Thank you. Thank you.",
        "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background.",
        "",
    ):
        assert not loops(text), text


def test_cut_repeats_keeps_one_phrase_of_each_run() -> None:
    tokens = [
        "In",
        "1813,",
        "in",
        "1813,",
        "in",
        "1813,",
        "in",
        "1813,",
        "in",
        "1813,",
        "it",
        "was",
        "the",
        "first",
    ]
    kept = cut_repeats(tokens)
    assert " ".join(tokens[i] for i in kept) == "In 1813, it was the first"
    assert cut_repeats(["No,", "no,", "no,", "I", "said", "Tuesday."]) == list(range(6))


def test_confidence_is_the_mean_log_probability() -> None:
    assert confidence([]) == -math.inf
    assert math.isclose(confidence([0.5, 0.5]), math.log(0.5))
    assert confidence([0.9, 0.9]) > confidence([0.9, 0.2])
