"""What an upload sends besides its file: the form fields of ``POST /v1/sessions``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from voxwire_client.messages import Task
from voxwire_client.options import PromptSpec, RedactMode, SessionOptions, SpeakerBounds

Prompts = Sequence[str | PromptSpec] | None
"""Phrases to listen for: texts (numbered p1, p2...) or :class:`PromptSpec`."""


def prompt_specs(prompts: Prompts) -> list[PromptSpec]:
    """``prompts`` as specs, a text becoming ``PromptSpec(id=f"p{n}", text=...)``."""
    return [
        prompt if isinstance(prompt, PromptSpec) else PromptSpec(id=f"p{i + 1}", text=prompt)
        for i, prompt in enumerate(prompts or ())
    ]


def session_options(
    prompts: Prompts = None,
    *,
    redact: RedactMode | str | None = None,
    language: str | None = None,
    model: str | None = None,
    diarize: SpeakerBounds | bool = False,
    vocabulary: Sequence[str] = (),
    task: Task | str = Task.TRANSCRIBE,
    keep_original_audio: bool = False,
    channels: str = "mixed",
    channel_labels: Sequence[str] | None = None,
) -> SessionOptions:
    """The options of ``AsyncClient.upload``'s keywords; ValueError for a choice
    that does not exist (a ``redact`` mode, a ``task``)."""
    return SessionOptions.model_validate(
        {
            "prompts": prompt_specs(prompts),
            "redact": redact,
            "language": language,
            "model": model,
            "diarize": diarize if isinstance(diarize, bool) else diarize.model_dump(),
            "vocabulary": tuple(vocabulary),
            "task": task,
            "keep_original_audio": keep_original_audio,
            "channels": channels,
            "channel_labels": None if channel_labels is None else tuple(channel_labels),
        }
    )


def form_fields(options: SessionOptions) -> dict[str, str]:
    """``options`` as the upload form's fields: lists as JSON, ``diarize`` as a flag
    with its bounds beside it, nothing for what is left to the platform or a flag
    that is off."""
    data: dict[str, str] = {}
    for name, value in options.model_dump(mode="json").items():
        if value is None or (name == "channels" and value == "mixed"):  # the default
            continue
        if name == "diarize":
            data["diarize"] = "true"
            data.update({k: str(v) for k, v in value.items() if v is not None})
        elif isinstance(value, list | dict):
            data[name] = json.dumps(value)
        elif isinstance(value, bool):
            if value:  # a flag not sent is false
                data[name] = "true"
        else:
            data[name] = str(value)
    return data


def upload_form(prompts: Prompts = None, **options: Any) -> dict[str, str]:
    """The form fields of an upload (the keywords of :func:`session_options`);
    ValueError for a ``redact`` or ``task`` that does not exist."""
    return form_fields(session_options(prompts, **options))
