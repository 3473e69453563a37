"""The upload form of ``POST /v1/sessions`` parsed into the session's options, once,
where it enters: its fields are strings (prompts and vocabulary as JSON or plain
text, diarize as a flag beside its bounds), checked here with hints for a form's
author; what they make is a :class:`~voxwire_client.options.SessionOptions`."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from voxwire.core.errors import InvalidRequestError
from voxwire.sessions.options import check_prompts
from voxwire.text.standing_prompts import MAX_PROMPTS
from voxwire_client.messages import Task
from voxwire_client.options import (
    MAX_SPEAKERS,
    ChannelMode,
    PromptSpec,
    RedactMode,
    SessionOptions,
    SpeakerBounds,
    Vocabulary,
)


@dataclass(frozen=True, slots=True)
class UploadForm:
    """The form's fields besides the file, as sent (None: not sent)."""

    prompts: str | None = None
    language: str | None = None
    model: str | None = None
    redact: str | None = None
    diarize: str | None = None
    min_speakers: str | None = None
    max_speakers: str | None = None
    vocabulary: str | None = None
    task: str | None = None
    keep_original_audio: str | None = None
    channels: str | None = None
    channel_labels: str | None = None

    def options(self) -> SessionOptions:
        """What the session asks for; InvalidRequestError naming the field that is wrong."""
        task = (self.task or "").strip().lower() or Task.TRANSCRIBE
        if task not in set(Task):
            raise InvalidRequestError(
                f"invalid task {self.task!r:.40}", hint="use 'transcribe' or 'translate'"
            )
        fields = {
            "language": (self.language or "").strip() or None,
            "model": (self.model or "").strip() or None,
            "task": Task(task),
            "prompts": parse_prompts(self.prompts),
            "redact": redact_mode(self.redact),
            "diarize": speaker_bounds(self.diarize, self.min_speakers, self.max_speakers),
            "vocabulary": parse_vocabulary(self.vocabulary),
            "keep_original_audio": flag("keep_original_audio", self.keep_original_audio),
            "channels": (self.channels or "").strip().lower() or ChannelMode.MIXED,
            "channel_labels": parse_labels(self.channel_labels),
        }
        try:
            return SessionOptions.model_validate(fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "options"
            raise InvalidRequestError(
                f"invalid {where}: {first['msg']}",
                hint="channels: mixed or separate; channel_labels: one label per channel, "
                'as "agent,customer", with channels=separate',
            ) from None


_PROMPT_LIST = TypeAdapter(list[PromptSpec | str])
_VOCABULARY: TypeAdapter[tuple[str, ...]] = TypeAdapter(Vocabulary)


def redact_mode(raw: str | None) -> RedactMode | None:
    """The mode an upload asks for (None: it does not say)."""
    if raw is None or not raw.strip():
        return None
    try:
        return RedactMode(raw.strip().lower())
    except ValueError:
        choices = ", ".join(m.value for m in RedactMode)
        raise InvalidRequestError(
            f"invalid redact {raw[:40]!r}", hint=f"use one of: {choices}"
        ) from None


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def flag(name: str, raw: str | None) -> bool:
    """A true/false field (not sent: false); InvalidRequestError for anything else."""
    value = (raw or "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise InvalidRequestError(f"invalid {name} {value[:20]!r}", hint="use true or false")
    return value in _TRUE


def _speaker_count(name: str, raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidRequestError(
            f"invalid {name} {raw[:20]!r}", hint=f"a whole number from 1 to {MAX_SPEAKERS}"
        ) from None


def speaker_bounds(
    diarize: str | None, min_speakers: str | None, max_speakers: str | None
) -> SpeakerBounds | None:
    """The diarization an upload asks for (None: off); InvalidRequestError for
    bad bounds, or bounds without ``diarize``."""
    flag = (diarize or "").strip().lower()
    if flag not in _TRUE + _FALSE:
        raise InvalidRequestError(f"invalid diarize {flag[:20]!r}", hint="use true or false")
    low = _speaker_count("min_speakers", min_speakers)
    high = _speaker_count("max_speakers", max_speakers)
    if flag not in _TRUE:
        if low is not None or high is not None:
            raise InvalidRequestError(
                "min_speakers and max_speakers need diarize", hint="add diarize=true"
            )
        return None
    try:
        return SpeakerBounds(min_speakers=low, max_speakers=high)
    except ValidationError as exc:
        raise InvalidRequestError(
            f"invalid speaker bounds: {exc.errors()[0]['msg']}",
            hint=f"1 <= min_speakers <= max_speakers <= {MAX_SPEAKERS}",
        ) from None


def parse_labels(raw: str | None) -> tuple[str, ...] | None:
    """Channel labels: a JSON list, or labels separated by commas (None: not sent)."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if text.startswith("["):
        try:
            return tuple(TypeAdapter(tuple[str, ...]).validate_json(text))
        except ValidationError:
            raise InvalidRequestError(
                "invalid channel_labels", hint='send "agent,customer" or ["agent", "customer"]'
            ) from None
    return tuple(label.strip() for label in text.split(","))


def parse_vocabulary(raw: str | None) -> tuple[str, ...]:
    """``raw`` is a JSON list of words, or words separated by commas."""
    if raw is None or not raw.strip():
        return ()
    text = raw.strip()
    try:
        words = (
            _VOCABULARY.validate_json(text)
            if text.startswith("[")
            else (
                _VOCABULARY.validate_python(tuple(w.strip() for w in text.split(",") if w.strip()))
            )
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" for p in first["loc"])
        raise InvalidRequestError(
            f"invalid vocabulary{where}: {first['msg']}",
            hint='send at most 50 words or names of up to 64 characters, as "ComfyUI, Kubernetes" '
            'or ["ComfyUI", "Kubernetes"]',
        ) from None
    return words


def parse_prompts(raw: str | None) -> tuple[PromptSpec, ...]:
    """``raw`` is a JSON list of strings or ``{"id", "text"}`` objects."""
    if not raw:
        return ()
    try:
        items = _PROMPT_LIST.validate_json(raw)
    except ValidationError as exc:
        raise InvalidRequestError(
            f"invalid prompts: {exc.errors()[0]['msg']}",
            hint='send a JSON list such as ["ask not", {"id": "p2", "text": "country"}]',
        ) from None
    if len(items) > MAX_PROMPTS:
        raise InvalidRequestError(f"too many prompts ({len(items)} > {MAX_PROMPTS})")
    specs = []
    for i, item in enumerate(items):
        try:
            specs.append(
                item if isinstance(item, PromptSpec) else PromptSpec(id=f"p{i + 1}", text=item)
            )
        except ValidationError:
            raise InvalidRequestError(
                f"invalid prompt #{i + 1}: empty or longer than 500 characters"
            ) from None
    return check_prompts(specs)
