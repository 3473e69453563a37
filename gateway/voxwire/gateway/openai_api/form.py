"""The form fields of an OpenAI transcription or translation, parsed once where
they enter into an :class:`OpenAIRequest`: the session's options, and how its
answer is shaped.

``model`` names a model the platform serves, or one of OpenAI's
(:data:`OPENAI_MODELS`: ``whisper-1``, ``gpt-4o-transcribe``,
``gpt-4o-mini-transcribe``...), which stands for the platform's choice, as an
upload that names no model gets; any other name is OpenAI's 404
``model_not_found``. ``prompt`` prompts the decoder as the session's vocabulary
does (:func:`prompt_vocabulary`); ``temperature`` is checked (0 to 1) and
otherwise ignored: the engines decode as the platform is configured to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from voxwire.core.config import Settings
from voxwire.gateway.openai_api.errors import OpenAIError, model_not_found
from voxwire.gateway.openai_api.shapes import Granularity, ResponseFormat
from voxwire.sessions.languages import served_models
from voxwire_client.messages import Task
from voxwire_client.options import SessionOptions

OPENAI_MODELS = re.compile(r"whisper-1|gpt-(?:4o-(?:mini-)?)?transcribe(?:-[a-z0-9-]+)?")
"""OpenAI's transcription models: each stands for the platform's own choice."""

PIECE_CHARS = 64
"""The longest vocabulary entry (:data:`voxwire_client.options.Vocabulary`)."""

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


@dataclass(frozen=True, slots=True)
class OpenAIRequest:
    """What an OpenAI request asks for, checked."""

    options: SessionOptions
    fmt: ResponseFormat = ResponseFormat.JSON
    granularities: frozenset[Granularity] = frozenset()
    temperature: float = 0.0
    stream: bool = False
    callback: str | None = None
    """A URL that gets the transcript once it is stored (:mod:`voxwire.sessions.webhooks`)."""


@dataclass(frozen=True, slots=True)
class OpenAIForm:
    """The form's fields besides the file, as sent (None: not sent)."""

    model: str
    language: str | None = None
    prompt: str | None = None
    response_format: str | None = None
    temperature: str | None = None
    timestamp_granularities: Sequence[str] = ()
    stream: str | None = None
    callback: str | None = None

    def request(self, settings: Settings, task: Task) -> OpenAIRequest:
        """The request (``task``: which route it came by); OpenAIError naming the bad field."""
        fmt = _response_format(self.response_format)
        granularities = _granularities(self.timestamp_granularities)
        if granularities and fmt is not ResponseFormat.VERBOSE_JSON:
            raise OpenAIError(
                400,
                "timestamp_granularities[] needs response_format=verbose_json",
                param="timestamp_granularities",
            )
        try:
            options = SessionOptions(
                model=served_model(self.model, settings),
                language=(self.language or "").strip() or None,
                task=task,
                vocabulary=prompt_vocabulary(self.prompt or ""),
            )
        except ValidationError as exc:
            raise OpenAIError(
                400, f"invalid prompt: {exc.errors()[0]['msg']}", param="prompt"
            ) from None
        return OpenAIRequest(
            options,
            fmt,
            granularities,
            _temperature(self.temperature),
            _flag(self.stream),
            (self.callback or "").strip() or None,
        )


def served_model(name: str, settings: Settings) -> str | None:
    """The served model ``name`` asks for; None for OpenAI's names (the platform
    chooses); OpenAIError 404 for any other."""
    name = name.strip()
    served = served_models(settings)
    if name in served:
        return name
    if OPENAI_MODELS.fullmatch(name):
        return None
    raise model_not_found(name, served)


def prompt_vocabulary(prompt: str) -> tuple[str, ...]:
    """The prompt as vocabulary entries: split at commas, a longer phrase into runs
    of whole words of up to :data:`PIECE_CHARS` characters (the decoder is prompted
    with them joined again)."""
    pieces: list[str] = []
    for phrase in (p.strip() for p in prompt.split(",")):
        run = ""
        for word in phrase.split():
            if run and len(run) + 1 + len(word) > PIECE_CHARS:
                pieces.append(run)
                run = ""
            run = f"{run} {word}" if run else word
        if run:
            pieces.append(run)
    return tuple(pieces)


def _response_format(raw: str | None) -> ResponseFormat:
    try:
        return ResponseFormat((raw or "json").strip().lower())
    except ValueError:
        known = ", ".join(f.value for f in ResponseFormat)
        raise OpenAIError(
            400,
            f"invalid response_format {raw!r:.20}: use one of {known}",
            param="response_format",
        ) from None


def _granularities(raw: Sequence[str]) -> frozenset[Granularity]:
    try:
        return frozenset(Granularity(g.strip().lower()) for g in raw if g.strip())
    except ValueError:
        raise OpenAIError(
            400,
            "invalid timestamp_granularities[]: use word, segment or both",
            param="timestamp_granularities",
        ) from None


def _temperature(raw: str | None) -> float:
    try:
        value = float(raw) if raw is not None and raw.strip() else 0.0
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise OpenAIError(
            400, f"invalid temperature {raw!r:.20}: a number from 0 to 1", param="temperature"
        )
    return value


def _flag(raw: str | None) -> bool:
    flag = (raw or "").strip().lower()
    if flag not in _TRUE + _FALSE:
        raise OpenAIError(400, f"invalid stream {raw!r:.20}: true or false", param="stream")
    return flag in _TRUE
