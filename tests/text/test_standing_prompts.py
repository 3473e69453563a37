"""Standing prompts across a session's finals: phrases split by the endpointer,
each occurrence once, slop and any-order prompts, prompts changed mid-session."""

from __future__ import annotations

import pytest

from voxwire.text.matching import Prompt
from voxwire.text.standing_prompts import StandingPrompts, check_speakers, prompt_of, spec_of
from voxwire_client.messages import MatchData


def _feed(prompts: StandingPrompts, *texts: str) -> list[list[MatchData]]:
    """Finals of 1 s each, 1 s apart: final i spans [2000 i, 2000 i + 1000]."""
    return [prompts.on_final(f"seg-{i}", t, 2000 * i, 2000 * i + 1000) for i, t in enumerate(texts)]


def test_a_phrase_split_across_finals_matches_once_when_its_last_word_commits() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="ask not what your country")])
    first, second, third = _feed(prompts, "And so, ask not", "what your country can do.", "Yes.")
    assert first == [] and third == []
    (hit,) = second
    assert hit.segment_ids == ("seg-0", "seg-1")
    assert hit.text == "ask not what your country"
    assert 0 < hit.start_ms < 1000 and 2000 < hit.end_ms < 3000
    assert hit.highlight == "And so, <em>ask not what your country</em> can do."


def test_each_occurrence_is_reported_once() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="budget")])
    hits = _feed(prompts, "The budget.", "Nothing here.", "Budget, budget again.", "Done.")
    assert [len(h) for h in hits] == [1, 0, 2, 0]
    assert [h.segment_ids for h in hits[2]] == [("seg-2",), ("seg-2",)]


def test_a_number_spoken_across_a_boundary_is_one_number() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="25%")])
    (_, hits) = _feed(prompts, "Growth was twenty", "five percent this year.")
    (hit,) = hits
    assert hit.text == "twenty five percent" and hit.segment_ids == ("seg-0", "seg-1")


def test_slop_allows_words_between_in_order() -> None:
    prompts = StandingPrompts(
        [
            Prompt(id="loose", text="ask not what", slop=2),
            Prompt(id="tight", text="ask not what", fuzzy=False),
        ]
    )
    (hits,) = _feed(prompts, "ask them please not what")
    assert [h.prompt_id for h in hits] == ["loose"]
    assert hits[0].text == "ask them please not what"
    (none,) = _feed(StandingPrompts([Prompt(id="p", text="ask not", slop=1)]), "not ask")
    assert none == []


def test_within_finds_all_words_in_any_order() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="budget approved", within=5)])
    hits = _feed(
        prompts, "They approved the new", "budget yesterday.", "Budget was never approved."
    )
    assert [[h.text for h in found] for found in hits] == [
        [],
        ["approved the new budget"],
        ["Budget was never approved"],
    ]
    far = StandingPrompts([Prompt(id="p", text="budget approved", within=3)])
    assert _feed(far, "approved the new shiny budget") == [[]]


def test_misrecognised_words_still_match_across_finals() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="fellow Americans")])
    (_, (hit,)) = _feed(prompts, "my fellow", "Amercans, ask not")
    assert hit.score < 1 and hit.text == "fellow Amercans"


def test_prompts_added_and_removed_mid_session() -> None:
    prompts = StandingPrompts([Prompt(id="a", text="budget")])
    assert [h.prompt_id for h in prompts.on_final("s0", "the budget for hiring", 0, 900)] == ["a"]
    prompts.add(Prompt(id="b", text="hiring plan"))
    assert prompts.remove("a") and not prompts.remove("a")
    # "hiring" was said before b was added: the window still finds the phrase
    hits = prompts.on_final("s1", "plan and the budget", 1000, 1900)
    assert [(h.prompt_id, h.segment_ids) for h in hits] == [("b", ("s0", "s1"))]
    assert prompts.on_final("s2", "the budget", 2000, 2900) == []
    assert [p.id for p in prompts.prompts] == ["b"]
    with pytest.raises(ValueError, match="duplicate"):
        prompts.add(Prompt(id="b", text="again"))
    with pytest.raises(ValueError, match="no words"):
        prompts.add(Prompt(id="c", text="... !!!"))


def test_a_phrase_longer_than_the_window_is_not_found() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="one two three four")], window=2)
    assert _feed(prompts, "one", "two", "three", "four") == [[], [], [], []]


def test_replaying_the_finals_rebuilds_the_state() -> None:
    texts = ["ask not", "what your country", "can do, ask not", "what you can do"]
    spec = [Prompt(id="p", text="ask not what"), Prompt(id="q", text="can do")]
    continuous = StandingPrompts(spec)
    expected = _feed(continuous, *texts)
    assert [len(h) for h in expected] == [0, 1, 1, 2]
    resumed = StandingPrompts(spec)
    resumed.replay((f"seg-{i}", t, 2000 * i, 2000 * i + 1000) for i, t in enumerate(texts[:3]))
    assert resumed.on_final("seg-3", texts[3], 6000, 7000) == expected[3]


def test_highlights_are_escaped() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="budget plan")])
    (_, (hit,)) = _feed(prompts, "<b>the budget", "plan</b> & more")
    assert hit.highlight == "&lt;b&gt;the <em>budget plan</em>&lt;/b&gt; &amp; more"


def test_an_old_phrase_stretched_by_a_word_into_the_next_final_is_not_new() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="hiring plan")])
    hits = _feed(prompts, "the hiring plan", "the plan", "then the hiring plan")
    assert [[h.segment_ids for h in found] for found in hits] == [[("seg-0",)], [], [("seg-2",)]]
    added = StandingPrompts()
    added.on_final("a", "the hiring plan", 0, 900)
    added.add(Prompt(id="p", text="hiring plan"))
    assert added.on_final("b", "the end", 1000, 1900) == []


# -- prompts limited to one speaker -----------------------------------------------------------


def _said(prompts: StandingPrompts, *turns: tuple[str, str | None]) -> list[list[str]]:
    """Finals of (speaker, text), as _feed times them; the prompt ids heard after each."""
    return [
        [h.prompt_id for h in prompts.on_final(f"seg-{i}", t, 2000 * i, 2000 * i + 1000, (), s)]
        for i, (s, t) in enumerate(turns)
    ]


def test_a_prompt_of_one_speaker_matches_only_what_that_speaker_says() -> None:
    prompts = StandingPrompts(
        [
            Prompt(id="anyone", text="budget"),
            Prompt(id="s2", text="budget", speaker="S2"),
            Prompt(id="s1", text="budget", speaker="S1"),
        ]
    )
    heard = _said(prompts, ("S1", "The budget is late."), ("S2", "Which budget?"), (None, "budget"))
    assert heard == [["anyone", "s1"], ["anyone", "s2"], ["anyone"]]


def test_a_speakers_phrase_is_found_across_anothers_interjection() -> None:
    """The speaker's own finals are matched together; the other voice between
    them is not part of it, and a phrase made of two voices is not theirs."""
    prompts = StandingPrompts([Prompt(id="p", text="ask not what your country", speaker="S1")])
    heard = [
        prompts.on_final("a", "and so ask not", 0, 1000, (), "S1"),
        prompts.on_final("b", "mm-hm", 1500, 1800, (), "S2"),
        prompts.on_final("c", "what your country can do", 2000, 3000, (), "S1"),
    ]
    assert heard[0] == [] and heard[1] == []
    (hit,) = heard[2]
    assert hit.segment_ids == ("a", "c") and hit.text == "ask not what your country"
    mixed = StandingPrompts([Prompt(id="p", text="ask not what your country", speaker="S1")])
    assert mixed.on_final("a", "and so ask not", 0, 1000, (), "S2") == []
    assert mixed.on_final("b", "what your country can do", 2000, 3000, (), "S1") == []


def test_a_speakers_prompt_survives_a_replay_and_keeps_its_speaker() -> None:
    spec = [Prompt(id="p", text="ask not what", speaker="S2")]
    assert prompt_of(spec_of(spec[0])) == spec[0] and spec_of(spec[0]).speaker == "S2"
    finals = [("a", "ask not", 0, 900, (), "S2"), ("b", "hello", 1000, 1900, (), "S1")]
    resumed = StandingPrompts(spec)
    resumed.replay(finals)
    (hit,) = resumed.on_final("c", "what you can do", 2000, 2900, (), "S2")
    assert hit.segment_ids == ("a", "c")


def test_a_speakers_prompt_needs_diarization() -> None:
    limited = [Prompt(id="p", text="budget", speaker="S1")]
    check_speakers(limited, diarized=True)
    check_speakers([Prompt(id="q", text="budget")], diarized=False)
    with pytest.raises(ValueError, match=r"limited to speaker S1.*no diarization"):
        check_speakers(limited, diarized=False)


def test_a_match_says_who_said_it_when_one_speaker_did() -> None:
    prompts = StandingPrompts([Prompt(id="p", text="ask not what")])
    (hit,) = prompts.on_final("a", "ask not what", 0, 900, (), "S2")
    assert hit.speaker == "S2"
    prompts.on_final("b", "we ask not", 1000, 1900, (), "S1")
    (across,) = prompts.on_final("c", "what you can do", 2000, 2900, (), "S2")
    assert across.segment_ids == ("b", "c") and across.speaker is None
    (plain,) = StandingPrompts([Prompt(id="p", text="ask")]).on_final("x", "ask", 0, 900)
    assert plain.speaker is None
