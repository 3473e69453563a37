"""The model, task and language of a session, chosen and checked before it is accepted.

A session may name a model among those the platform serves (``served_models``:
the ``model`` setting, the default, and ``models``); anything else is a 400
that lists them. A session that names none takes the route of its language
(the ``routes`` setting: ``{"en": "tiny.en", "*": "base"}``, ``*`` for every
other language and for ``auto``), else the default model (:func:`route`).
:func:`choose` does it all, in that order.

``"auto"`` asks the worker to detect the language (files: on the first speech;
streams: on the first final). An English-only model (``tiny.en``) can neither
detect nor speak another language: asking it to is a 400, not a transcript in
the wrong language.

A session's ``task`` is ``transcribe`` (the text in the language spoken) or
``translate`` (the text in English, Whisper's translate task): only a
multilingual model can translate, so asking ``tiny.en`` to is a 400 as well.
A translation that does not say which language is spoken detects it
(:func:`spoken_default`): translating from English would only transcribe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from voxwire.core.config import Settings
from voxwire.core.errors import InvalidRequestError
from voxwire.models.registry import catalog, multilingual
from voxwire_client.messages import Task

AUTO = "auto"
_CODE = re.compile(r"auto|[a-z]{2,3}")


@dataclass(frozen=True, slots=True)
class Choice:
    """What a session is transcribed with: checked, normalised."""

    model: str
    task: Task
    language: str


def served_models(settings: Settings) -> tuple[str, ...]:
    """The models a session may ask for, the default first."""
    return settings.served_models


def route(language: str, settings: Settings) -> str:
    """The model for a session in ``language`` that names none."""
    routes = settings.pools.routes
    return routes.get(language) or routes.get("*") or settings.engine.model


def choose(
    settings: Settings,
    *,
    model: str | None,
    task: Task | str | None,
    language: str | None,
) -> Choice:
    """The session's model, task and language from what it asked for (None or
    empty: the defaults: the route of its language, ``transcribe``, the
    platform's language, or ``auto`` for a translation); InvalidRequestError
    when any is unknown or the model cannot do the rest."""
    chosen = parse_task(task)
    spoken = (language or spoken_default(chosen, settings.engine.language)).strip().lower()
    name = check_model(model, settings) if model else route(spoken, settings)
    return Choice(name, check_task(chosen, name), check_language(spoken, name))


def check_model(model: str | None, settings: Settings) -> str:
    """The model for a session that asks for ``model`` (None: the default);
    InvalidRequestError when the platform does not serve it."""
    served = served_models(settings)
    if model is None or model == "":
        return served[0]
    if model not in served:
        raise InvalidRequestError(
            f"model {model!r} is not served here",
            hint=f"models served: {', '.join(served)}",
        )
    return model


def check_language(language: str, model: str | Path) -> str:
    """``language`` normalised ("en", "de", "auto"); InvalidRequestError when it is
    not a language code or ``model`` is English-only and it is not English."""
    language = language.strip().lower()
    if not _CODE.fullmatch(language):
        raise InvalidRequestError(
            f"invalid language {language!r}", hint="use a code like 'en' or 'de', or 'auto'"
        )
    if language != "en" and multilingual(model) is False:
        others = [name for name, spec in catalog().items() if spec.multilingual]
        wanted = "language detection" if language == AUTO else f"language {language!r}"
        raise InvalidRequestError(
            f"model {str(model)!r} is English-only: it cannot do {wanted}",
            hint=f"ask for language 'en', or use a multilingual model ({', '.join(others)})",
        )
    return language


def parse_task(task: Task | str | None) -> Task:
    """The task a session asks for (None or empty: transcribe); InvalidRequestError
    when it is neither task."""
    try:
        return Task((task or Task.TRANSCRIBE).strip().lower())
    except ValueError:
        raise InvalidRequestError(
            f"invalid task {str(task)[:40]!r}", hint="use 'transcribe' or 'translate'"
        ) from None


def check_task(task: Task | str | None, model: str | Path) -> Task:
    """The task a session asks for (see :func:`parse_task`); InvalidRequestError
    also when ``model`` is English-only and asked to translate."""
    chosen = parse_task(task)
    if chosen is Task.TRANSLATE and multilingual(model) is False:
        others = [name for name, spec in catalog().items() if spec.multilingual]
        raise InvalidRequestError(
            f"model {str(model)!r} is English-only: it cannot translate",
            hint=f"use a multilingual model ({', '.join(others)}), or task 'transcribe'",
        )
    return chosen


def spoken_default(task: Task, default: str = "en") -> str:
    """The language of a session that names none: ``default``, or "auto" (detected)
    for a translation."""
    return AUTO if task is Task.TRANSLATE else default
