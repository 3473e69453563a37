"""Re-transcription: a session's stored audio transcribed again, as a new version.

``POST /v1/sessions/{sid}/retranscribe`` with a :class:`RetranscribeRequest`
answers a :class:`RetranscribeAccepted`. The new version's messages come on the
session's topics with ``version`` set and ``seq`` going on after the session's
last; once its ``transcript`` is stored it is the session's transcript (and
what search finds), and every earlier version stays readable
(``GET /v1/sessions/{sid}/transcript?version=N``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from voxwire_client.api import Vocabulary
from voxwire_client.messages import Task


class RetranscribeRequest(BaseModel):
    """How to transcribe the session again; None: as the platform's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = Field(default=None, description="a model the platform serves")
    language: str | None = Field(
        default=None,
        description="a language code or 'auto'; None: the session's (else the platform's)",
    )
    vocabulary: Vocabulary = ()
    task: Task | None = Field(
        default=None,
        description="transcribe, or translate into English (a multilingual model); None: the first",
    )


class RetranscribeAccepted(BaseModel):
    """A re-transcription queued: the version it will publish."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sid: str
    version: int = Field(ge=2, description="the transcript version being made")
    model: str
    first_seq: int = Field(ge=1, description="the seq of its first message")
