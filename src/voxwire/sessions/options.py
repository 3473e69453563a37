"""A session's options decided: :func:`resolve` checks what a request asked for
(:class:`~voxwire_client.options.SessionOptions`, parsed where the request entered)
and fills in what it left to the platform, giving the
:class:`~voxwire.wire.records.ResolvedOptions` that the bus carries. Uploads,
streams, MQTT requests and re-transcriptions all go through it."""

from __future__ import annotations

from collections.abc import Sequence

from voxwire.core.config import Settings
from voxwire.core.errors import InvalidRequestError
from voxwire.sessions.languages import choose
from voxwire.text.standing_prompts import MAX_PROMPTS, StandingPrompts, check_speakers, prompt_of
from voxwire.wire.records import ResolvedOptions
from voxwire_client.options import ChannelMode, PromptSpec, SessionOptions


def resolve(settings: Settings, tenant_name: str, options: SessionOptions) -> ResolvedOptions:
    """``options`` with the model, task and language chosen (:func:`choose`) and
    the redaction the tenant's policy gives; InvalidRequestError for prompts a
    session cannot listen for, or a model, task or language it cannot have."""
    check_prompts(options.prompts)
    labelled = options.diarize is not None or options.channels is ChannelMode.SEPARATE
    check_prompt_speakers(options.prompts, diarized=labelled)
    choice = choose(settings, model=options.model, task=options.task, language=options.language)
    decided = {
        "language": choice.language,
        "model": choice.model,
        "task": choice.task,
        "redact": settings.security.redact_for(tenant_name, options.redact),
    }
    asked = options.model_dump(include=set(SessionOptions.model_fields))
    return ResolvedOptions.model_validate({**asked, **decided})


def check_prompts(specs: Sequence[PromptSpec]) -> tuple[PromptSpec, ...]:
    """``specs`` if a session can listen for them all, else InvalidRequestError
    (duplicate ids, a prompt without words, ``within`` shorter than the prompt, more
    than :data:`~voxwire.text.standing_prompts.MAX_PROMPTS`)."""
    try:
        StandingPrompts().change([prompt_of(p) for p in specs], (), limit=MAX_PROMPTS)
    except ValueError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc}", hint="a prompt needs words; ids must be unique"
        ) from None
    return tuple(specs)


def check_prompt_speakers(specs: Sequence[PromptSpec], *, diarized: bool) -> None:
    """InvalidRequestError for a prompt limited to a speaker in a session
    without diarization: no final would carry a speaker, so it would never match."""
    try:
        check_speakers(specs, diarized=diarized)
    except ValueError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc}",
            hint="ask for diarization or separate channels too, or drop the prompt's speaker",
        ) from None
