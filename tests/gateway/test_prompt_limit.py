"""One prompt limit for uploads and live streams (MAX_PROMPTS)."""

from __future__ import annotations

import json

import pytest

from voxwire.core.errors import InvalidRequestError
from voxwire.gateway.forms import parse_prompts
from voxwire.sessions.options import check_prompts
from voxwire.text.standing_prompts import MAX_PROMPTS
from voxwire_client.api import PromptSpec


def _specs(n: int) -> list[PromptSpec]:
    return [PromptSpec(id=f"p{i}", text=f"word{i}") for i in range(n)]


def test_an_upload_may_have_max_prompts_and_no_more() -> None:
    raw = [{"id": f"p{i}", "text": f"word{i}"} for i in range(MAX_PROMPTS + 1)]
    assert len(parse_prompts(json.dumps(raw[:MAX_PROMPTS]))) == MAX_PROMPTS
    with pytest.raises(InvalidRequestError, match=f"too many prompts .* > {MAX_PROMPTS}"):
        parse_prompts(json.dumps(raw))


def test_a_stream_may_have_max_prompts_and_no_more() -> None:
    assert len(check_prompts(_specs(MAX_PROMPTS))) == MAX_PROMPTS
    with pytest.raises(InvalidRequestError, match=f"at most {MAX_PROMPTS} prompts"):
        check_prompts(_specs(MAX_PROMPTS + 1))
