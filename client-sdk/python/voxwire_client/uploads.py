"""What an upload sends besides its file: the form fields of ``POST /v1/sessions``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from voxwire_client.api import PromptSpec, RedactMode, SpeakerBounds
from voxwire_client.messages import Task

Prompts = Sequence[str | PromptSpec] | None
"""Phrases to listen for: texts (numbered p1, p2...) or :class:`PromptSpec`."""


def prompt_specs(prompts: Prompts) -> list[PromptSpec]:
    """``prompts`` as specs, a text becoming ``PromptSpec(id=f"p{n}", text=...)``."""
    return [
        prompt if isinstance(prompt, PromptSpec) else PromptSpec(id=f"p{i + 1}", text=prompt)
        for i, prompt in enumerate(prompts or ())
    ]


def upload_form(
    prompts: Prompts = None,
    *,
    redact: RedactMode | str | None = None,
    language: str | None = None,
    model: str | None = None,
    diarize: SpeakerBounds | bool = False,
    vocabulary: Sequence[str] = (),
    task: Task | str = Task.TRANSCRIBE,
) -> dict[str, str]:
    """The form fields of an upload (see ``AsyncClient.upload``); ValueError for
    a ``redact`` or ``task`` that does not exist."""
    specs = [p.model_dump() for p in prompt_specs(prompts)]
    data = {
        "prompts": json.dumps(specs),
        "vocabulary": json.dumps(list(vocabulary)),
        "task": Task(task).value,
    }
    if redact is not None:
        data["redact"] = RedactMode(redact).value
    if language is not None:
        data["language"] = language
    if model is not None:
        data["model"] = model
    if diarize is not False:
        data["diarize"] = "true"
        bounds = diarize if isinstance(diarize, SpeakerBounds) else SpeakerBounds()
        for name, value in bounds.model_dump(exclude_none=True).items():
            data[name] = str(value)
    return data
