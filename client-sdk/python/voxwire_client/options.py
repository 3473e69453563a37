"""What a session asks for: :class:`SessionOptions`, one value whichever way the
session is opened (an upload's form, ``POST /v1/streams``, an MQTT request, a
re-transcription), with the field types it is made of. Each request of
:mod:`voxwire_client.api` extends it; the platform parses a request once, where it
enters, and passes the options on as this value.

A session's options, and what leaves them to the platform (None):

===============  =====================================================================
``language``     a code such as ``de``, or ``auto`` to detect it; None: the platform's
``model``        one of the models the platform serves; None: the route of the language
``task``         ``transcribe``, or ``translate`` into English (a multilingual model)
``prompts``      phrases to listen for (:class:`PromptSpec`)
``redact``       what becomes of personal data (:class:`RedactMode`); None: the tenant's
``diarize``      label speakers, within bounds (:class:`SpeakerBounds`); None: off
``vocabulary``   words to expect, written as given
``channels``     ``mixed`` (the default) or ``separate`` (:class:`ChannelMode`)
===============  =====================================================================

``channel_labels`` (with ``separate``): each channel's speaker label, as many as the
audio has channels (``agent``, ``customer``); None: ``ch1``, ``ch2``...

``keep_original_audio`` (a redacted session): keep the audio as recorded besides
the audio with the redacted spans silenced, for the session's owner alone.

Live streams add :class:`Endpointing`, when an utterance ends, whose defaults are
declared here once.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from voxwire_client.messages import Task, TaskField


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Vocabulary = Annotated[
    tuple[Annotated[str, Field(min_length=1, max_length=64, pattern=r"\S")], ...],
    Field(
        max_length=50,
        description="words the session expects (names, product terms; at most 50 of 64 "
        "characters): the decoder is prompted with them, so it writes them as given",
    ),
]


SPEAKER_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,23}$"
_SPEAKER = re.compile(SPEAKER_PATTERN)


def validate_speaker(label: str) -> str:
    """Return ``label`` if it is a speaker label (diarization's ``S1``, ``S2``..., or
    a channel's label such as ``agent``: a letter, then up to 23 letters, digits,
    ``_`` or ``-``), else raise."""
    if not _SPEAKER.fullmatch(label):
        raise ValueError(
            "speaker must be a label such as S1 or agent (a letter, then at most 23 "
            f"letters, digits, _ or -), not {label[:30]!r}"
        )
    return label


SpeakerLabel = Annotated[
    str,
    AfterValidator(validate_speaker),
    WithJsonSchema({"type": "string", "pattern": SPEAKER_PATTERN}),
]
"""A speaker label: diarization's ``S1``, ``S2``..., or a channel's label (``agent``)."""


class ChannelMode(StrEnum):
    """What becomes of a recording's channels: ``mixed`` averages them into one
    track (a diarized session then tells the speakers apart by voice);
    ``separate`` transcribes each channel as its own track, each final
    labelled with its channel and the channel's label as its speaker (a call
    recorder's stereo: one party per channel)."""

    MIXED = "mixed"
    SEPARATE = "separate"


MAX_CHANNELS = 8
"""The most channels a session may transcribe separately."""


def default_channel_labels(count: int) -> tuple[str, ...]:
    """The labels of channels that were given none: ``ch1``, ``ch2``..."""
    return tuple(f"ch{n}" for n in range(1, count + 1))


ChannelLabels = Annotated[
    tuple[SpeakerLabel, ...],
    Field(
        max_length=MAX_CHANNELS,
        description="with channels separate: the speaker label of each channel, in order "
        "(e.g. ['agent', 'customer']); as many as the audio has channels; None: ch1, ch2...",
    ),
]


class PromptSpec(BaseModel):
    """A phrase to listen for.

    Matched on every committed final together with the finals just before it,
    so a phrase split between two segments is found; case, punctuation and how
    numbers are spelled do not matter ("twelve percent" = "12%"). ``fuzzy``
    (the default) tolerates small recognition errors ("Amercans"); ``slop``
    lets up to that many other words come between the phrase's words (in
    order); ``within`` asks instead for all its words, in any order, within
    that many words. ``speaker`` (a session with diarization) limits the
    prompt to what that speaker says: only finals labelled with it are
    matched, each together with that speaker's finals just before it.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    text: str = Field(min_length=1, max_length=500)
    fuzzy: bool = True
    slop: int = Field(default=0, ge=0, le=10)
    within: int | None = Field(default=None, ge=1, le=50)
    speaker: SpeakerLabel | None = Field(
        default=None,
        description="only what this speaker (S1, S2... or a channel's label) says; needs "
        "diarization or separate channels",
    )


class RedactMode(StrEnum):
    """What becomes of personal data (card numbers, SSNs, phone and account
    numbers, email and street addresses, IBANs; written or spoken) before a
    transcript leaves the worker: ``off`` keeps it, ``mask`` turns its letters
    and digits into ``*``, ``entity`` replaces it by its type, e.g.
    ``[CREDIT_CARD]``; ``numbers`` does what ``entity`` does and replaces every
    other number of four digits or more (in any written form) by ``[NUMBER]``,
    for the most careful tenants."""

    OFF = "off"
    MASK = "mask"
    ENTITY = "entity"
    NUMBERS = "numbers"


MAX_SPEAKERS = 20
"""The most speakers a session may ask diarization for."""


class SpeakerBounds(_Options):
    """Diarization on a session, with bounds on how many speakers it has
    (None: the count is found)."""

    min_speakers: int | None = Field(default=None, ge=1, le=MAX_SPEAKERS)
    max_speakers: int | None = Field(default=None, ge=1, le=MAX_SPEAKERS)

    @model_validator(mode="after")
    def _ordered(self) -> SpeakerBounds:
        low, high = self.min_speakers, self.max_speakers
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_speakers ({low}) is more than max_speakers ({high})")
        return self


PRE_ROLL_MS = 200
"""Audio kept before the speech of an utterance, so that its first word is whole."""


class EndpointingPolicy(StrEnum):
    """When a live stream's final is decided.

    - ``fast``: once the speaker has paused for 200 ms, if the transcript so far
      ends a sentence (sentence-final punctuation, no word that needs more after
      it), the final goes out then; otherwise after ``min_silence_ms``. Speech
      that resumes within ``min_silence_ms`` gives a final marked ``continues``:
      the same utterance goes on.
    - ``balanced``: the final goes out after ``min_silence_ms`` of silence.
    - ``patient``: as balanced, with 1000 ms of silence unless ``min_silence_ms``
      is given (dictation, slow or hesitant speakers).
    """

    FAST = "fast"
    BALANCED = "balanced"
    PATIENT = "patient"


PATIENT_SILENCE_MS = 1000
"""The silence that ends an utterance under the ``patient`` policy, unless given."""


class Endpointing(_Options):
    """When a live stream's utterance ends and what is sent before it does: the
    endpointer's settings. The JSON of a stream request may also give them at its
    top level (``{"min_silence_ms": 300}``), as it did before they were grouped,
    or give just the policy (``{"endpointing": "fast"}``)."""

    policy: EndpointingPolicy = Field(
        default=EndpointingPolicy.BALANCED,
        description="fast: a final as soon as a finished sentence pauses (200 ms), else after "
        "min_silence_ms; balanced: after min_silence_ms; patient: after 1000 ms by default",
    )
    min_silence_ms: int = Field(
        default=600, ge=100, le=10_000, description="silence that ends an utterance"
    )
    min_speech_ms: int = Field(
        default=250, ge=0, le=10_000, description="speech shorter than this is ignored"
    )
    partial_interval_s: float = Field(
        default=2.0, ge=0, le=60, description="how often partials come (0: none)"
    )
    max_segment_s: float = Field(
        default=30.0, ge=1, le=30, description="an utterance longer than this is cut"
    )
    vad_threshold: float = Field(
        default=0.5, gt=0, lt=1, description="the speech probability that counts as speech"
    )

    @model_validator(mode="before")
    @classmethod
    def _policy_alone(cls, data: Any) -> Any:
        """``"fast"`` is ``{"policy": "fast"}``; patient's silence unless given."""
        if isinstance(data, str):
            data = {"policy": data}
        if isinstance(data, dict) and data.get("policy") == EndpointingPolicy.PATIENT:
            data = {"min_silence_ms": PATIENT_SILENCE_MS, **data}
        return data

    @model_validator(mode="after")
    def _room_for_an_utterance(self) -> Endpointing:
        shortest = 2 * (self.min_silence_ms + PRE_ROLL_MS) / 1000
        if self.max_segment_s < shortest:
            raise ValueError(
                f"max_segment_s ({self.max_segment_s:g}) must be at least twice min_silence_ms "
                f"and the {PRE_ROLL_MS} ms kept before speech ({shortest:g} s)"
            )
        return self


ENDPOINTING_FIELDS = frozenset(Endpointing.model_fields) - {"policy"}
"""The names of the endpointing settings, as a stream request's JSON may give them
at its top level (all but the policy, which came later)."""


def diarize_flag_in_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema says what :meth:`SessionOptions._diarize_as_a_flag` takes."""
    diarize = schema["properties"]["diarize"]
    diarize["anyOf"].insert(-1, {"type": "boolean"})
    for name in ("min_speakers", "max_speakers"):
        schema["properties"].setdefault(
            name,
            {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SPEAKERS,
                "description": f"with diarize true: {name.replace('_', ' ')} (1-{MAX_SPEAKERS})",
            },
        )


class SessionOptions(_Options):
    """What a session asks for (see the module's table); None leaves it to the platform."""

    model_config = ConfigDict(json_schema_extra=diarize_flag_in_schema)

    language: str | None = Field(
        default=None,
        description="a language code such as 'de', or 'auto' to detect it; "
        "None: the platform's default",
    )
    model: str | None = Field(
        default=None,
        description="one of the models the platform serves (GET /healthz); None: its default",
    )
    task: TaskField = Task.TRANSCRIBE
    prompts: tuple[PromptSpec, ...] = ()
    redact: RedactMode | None = Field(
        default=None, description="personal data in the transcript; None: the platform's default"
    )
    diarize: SpeakerBounds | None = Field(
        default=None,
        description="label each segment with its speaker (S1, S2... in order of appearance), "
        "within these bounds; true: bounds found; None or false: off",
    )
    vocabulary: Vocabulary = ()
    keep_original_audio: bool = Field(
        default=False,
        description="with redaction: keep the audio as recorded too (only the session's "
        "owner may fetch it, GET /v1/sessions/{sid}/audio?original=true); false: only the "
        "audio with the redacted spans silenced is kept",
    )

    channels: ChannelMode = Field(
        default=ChannelMode.MIXED,
        description="mixed: the channels averaged into one track; separate: each channel "
        "transcribed on its own, its finals labelled with its channel and label",
    )
    channel_labels: ChannelLabels | None = None

    @model_validator(mode="after")
    def _channel_labels(self) -> SessionOptions:
        if self.channels is ChannelMode.SEPARATE and self.diarize is not None:
            raise ValueError(
                "separate channels say who spoke: leave diarize out (or mix the channels)"
            )
        labels = self.channel_labels
        if labels is None:
            return self
        if self.channels is not ChannelMode.SEPARATE:
            raise ValueError("channel_labels need channels 'separate'")
        if len(set(labels)) != len(labels):
            raise ValueError(f"channel_labels must differ from each other: {list(labels)}")
        return self

    def labels_for(self, count: int) -> tuple[str, ...]:
        """The speaker labels of ``count`` separate channels; ValueError, saying
        what to do, when the session gave labels for another number of channels."""
        if self.channel_labels is None:
            return default_channel_labels(count)
        if len(self.channel_labels) != count:
            raise ValueError(
                f"{len(self.channel_labels)} channel_labels given for audio of {count} "
                f"channel(s): give one label per channel"
            )
        return self.channel_labels

    @model_validator(mode="before")
    @classmethod
    def _diarize_as_a_flag(cls, data: Any) -> Any:
        """``diarize: true`` (with ``max_speakers``/``min_speakers`` beside it, as forms
        and earlier stream requests send them) is the same as bounds."""
        if not isinstance(data, dict) or not isinstance(data.get("diarize"), bool | None):
            return data
        data = dict(data)
        flag = data.pop("diarize", None)
        given = {k: data.pop(k) for k in ("min_speakers", "max_speakers") if k in data}
        given = {k: v for k, v in given.items() if v is not None}
        if flag:
            data["diarize"] = given
        elif given:
            raise ValueError("min_speakers and max_speakers need diarize")
        return data
