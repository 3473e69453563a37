"""Jobs as data: what a worker needs to transcribe one uploaded file.

Serialised as JSON on the ``transcription.jobs`` topic (key = sid).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from voxwire_client.api import PromptSpec, RedactMode


class FileJob(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sid: str
    tenant_id: str
    audio_key: str = Field(description="blob key of the 16 kHz mono PCM16LE audio")
    duration_ms: int = Field(ge=0)
    language: str = "en"
    prompts: tuple[PromptSpec, ...] = ()
    redact: RedactMode = RedactMode.OFF
    first_seq: int = Field(default=2, ge=1, description="seq of the job's first message")
