"""Two voices of a mono telephone call are kept apart by the file path's
diarization: calls built from two clearly different voices of the eval set
(``benchmarks/bench_two_party.py``), through an 8 kHz mu-law line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from voxwire.workers.speakers.encoder import shared_encoder
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

MAX_DER = 0.15
"""Measured 4.7 % and 12.2 % on these calls at 8 kHz (the bench): a stated bound."""


@pytest.mark.parametrize("name", ["librivox-man+lj-woman", "mfa-man+ls1995-woman"])
def test_a_two_party_8k_call_gets_two_speakers_with_their_turns(name: str) -> None:
    from bench_two_party import der, made_call, telephone

    call = made_call(name)
    audio = telephone(call.audio)
    turns = diarize(audio, shared_encoder(), DiarizationOptions())  # no bounds, as a new user
    assert len({t.speaker for t in turns}) == 2
    assert der(call, turns) < MAX_DER
