"""Re-transcription: a session's stored audio transcribed again, as a new version.

``POST /v1/sessions/{sid}/retranscribe`` with a :class:`RetranscribeRequest`
answers a :class:`RetranscribeAccepted`. The new version's messages come on the
session's topics with ``version`` set and ``seq`` going on after the session's
last; once its ``transcript`` is stored it is the session's transcript (and
what search finds), and every earlier version stays readable
(``GET /v1/sessions/{sid}/transcript?version=N``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voxwire_client.options import SessionOptions


class RetranscribeRequest(SessionOptions):
    """How to transcribe the session again (None: as the platform's default; the
    language: the session's). The new version keeps the session's redaction and
    runs without prompts: its matches stay those of the first version."""

    @model_validator(mode="after")
    def _kept_from_the_session(self) -> RetranscribeRequest:
        if self.prompts:
            raise ValueError("prompts are matched once, on the first version: drop them")
        if self.redact is not None:
            raise ValueError("a new version keeps the session's redaction: drop redact")
        if self.keep_original_audio:
            raise ValueError("a new version keeps the session's audio: drop keep_original_audio")
        return self


class RetranscribeAccepted(BaseModel):
    """A re-transcription queued: the version it will publish."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sid: str
    version: int = Field(ge=2, description="the transcript version being made")
    model: str
    first_seq: int = Field(ge=1, description="the seq of its first message")
    redacted_audio: bool = Field(
        default=False,
        description="the audio it transcribes has the session's redacted spans silenced "
        "(a redacted session: its audio as recorded is never transcribed again)",
    )
