"""How benchmarks/bench_redaction_paths.py scores what a user received of a call
(evaluation/redaction/calls.py): each item is found between what was said around
it across the call's sentences, what survives of it outside the markers is a
leak, and a marker is right only on personal data."""

from __future__ import annotations

import random

from evaluation.redaction.calls import Call, PathScore, Turn, calls, turns
from evaluation.redaction.said import Item, Take, items

QUESTION = Take(Item(None, "can you confirm the card number on the account?", "", ""), "en-us", 160)
CARD = Take(Item("CREDIT_CARD", "yes, it is", "4111 1111 1111 1111", ""), "en-gb", 140)
RECIPE = Take(Item(None, "the recipe needs four eggs and two cups of flour", "", ""), "en-us", 175)
EMAIL = Take(Item("EMAIL_ADDRESS", "my email is", "jane dot doe at example dot com", ""), "en", 140)
CALL = Call((Turn(CARD, QUESTION), Turn(RECIPE), Turn(EMAIL)), (0.8, 1.2, 0.5))
ASKED = "Can you confirm the card number on the account?"


def test_an_answer_hidden_in_the_final_after_its_question_is_recalled() -> None:
    finals = [ASKED, "Yes, it is [ACCOUNT_NUMBER], The recipe needs four eggs."]
    finals.append("My email is [EMAIL_ADDRESS].")
    score = PathScore()
    score.add(CALL, " ".join(finals), finals)
    assert (score.total.items, score.total.hidden) == (2, 2)
    assert (score.prompted.items, score.prompted.hidden, score.apart) == (1, 1, 1)
    assert (score.total.findings, score.total.right) == (2, 2)  # another type is still hidden
    assert not score.missed and not score.lost


def test_what_survives_outside_a_marker_is_a_leak() -> None:
    text = f"{ASKED} Yes, it is 4,111,111,111,111,111,111, The recipe needs four eggs. "
    text += "My email is jane.doe@[EMAIL_ADDRESS]."
    score = PathScore()
    score.add(CALL, text)
    assert (score.total.items, score.total.hidden) == (2, 0)
    assert [leak for _, leak in score.missed] == [
        "4,111,111,111,111,111,111",
        "jane.doe@[EMAIL_ADDRESS]",
    ]


def test_a_marker_off_personal_data_is_a_false_positive_and_unwritten_items_are_lost() -> None:
    text = f"{ASKED} Yes, it is. The recipe needs [NUMBER] eggs and two cups. My email is."
    score = PathScore()
    score.add(CALL, text)
    assert score.total.items == 0 and score.lost == 2
    assert (score.by_entity["NUMBER"].findings, score.by_entity["NUMBER"].right) == (1, 0)


def test_calls_hold_every_turn_once_with_a_pause_between_sentences() -> None:
    said = turns(items())
    made = calls(said, random.Random(7))
    assert sorted(map(id, (t for c in made for t in c.turns))) == sorted(map(id, said))
    assert all(len(c.pauses_s) == len(c.sentences()) - 1 for c in made)
    assert all(0.5 <= p <= 1.5 for c in made for p in c.pauses_s)
    assert any(t.question is not None for t in said)
