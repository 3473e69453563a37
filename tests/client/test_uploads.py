"""The form an SDK upload sends: what a caller asks for, by the gateway's names;
a task or a redaction mode that does not exist fails before anything is sent."""

from __future__ import annotations

import json

import pytest

from voxwire_client import PromptSpec, Task
from voxwire_client.api import SpeakerBounds
from voxwire_client.uploads import upload_form


def test_an_upload_asks_for_what_the_caller_chose() -> None:
    form = upload_form(
        ["fellow americans", PromptSpec(id="x", text="ask not")],
        redact="mask",
        language="auto",
        diarize=SpeakerBounds(max_speakers=2),
        vocabulary=["ComfyUI"],
        task="translate",
    )
    assert json.loads(form.pop("prompts")) == [
        {"id": "p1", "text": "fellow americans", "fuzzy": True, "slop": 0, "within": None,
         "speaker": None},
        {"id": "x", "text": "ask not", "fuzzy": True, "slop": 0, "within": None, "speaker": None},
    ]  # fmt: skip
    assert form == {
        "vocabulary": '["ComfyUI"]',
        "task": "translate",
        "redact": "mask",
        "language": "auto",
        "diarize": "true",
        "max_speakers": "2",
    }


def test_an_upload_transcribes_unless_told_to_translate() -> None:
    assert upload_form()["task"] == "transcribe"
    assert upload_form(task=Task.TRANSLATE)["task"] == "translate"
    assert "language" not in upload_form(task="translate")  # the platform detects it


@pytest.mark.parametrize(("field", "value"), [("task", "summarise"), ("redact", "all")])
def test_a_choice_that_does_not_exist_fails_before_sending(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=value):
        upload_form(**{field: value})  # type: ignore[arg-type]
