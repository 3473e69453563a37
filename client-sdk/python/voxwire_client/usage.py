"""Quotas and usage on the wire: what ``GET /v1/usage`` answers
(:class:`UsageReport`), and what a refusal over a quota carries
(:class:`QuotaExceeded`, in :attr:`voxwire_client.api.ErrorBody.quota`, over
HTTP with status 429 and over MQTT in the error answer of a request).

Quotas, by name: ``live_streams`` (live streams under way), ``uploads_in_flight``
(file jobs queued or being transcribed: uploads and re-transcriptions),
``audio_seconds_per_day`` and ``audio_seconds_per_month`` (audio transcribed
since the start of the UTC day or month), ``upload_bytes`` and
``upload_seconds`` (the largest upload, its size and length). A quota is set for
a tenant or for one of its keys; none set: unlimited.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QuotaExceeded(_Model):
    """The quota a request would exceed."""

    quota: str = Field(description="the quota's name, e.g. live_streams")
    scope: Literal["tenant", "key"] = Field(description="whose quota: the tenant's or the key's")
    limit: int
    used: float = Field(
        description="the current use (upload_bytes, upload_seconds: the request's own)"
    )
    resets_at: datetime | None = Field(
        default=None,
        description="when the use falls back to zero (the audio quotas, UTC); "
        "null: when sessions under way end",
    )


class QuotaStatus(_Model):
    """A quota set for the tenant (or one of its keys) and its current use."""

    quota: str
    scope: Literal["tenant", "key"]
    key_id: str | None = None
    limit: int
    used: float | None = Field(
        default=None, description="the current use; null for the per-upload limits"
    )
    resets_at: datetime | None = None


class UsageEntry(_Model):
    """Audio transcribed on one UTC day with one model, of one kind, by one key."""

    day: date
    tenant_id: str
    key_id: str | None = None
    model: str
    kind: Literal["file", "live", "retranscription"]
    audio_seconds: float
    sessions: int = Field(description="session versions transcribed")


class UsageReport(_Model):
    """``GET /v1/usage``: a tenant's usage from ``since`` to ``until`` (UTC days, both
    included) and its quotas with their current use."""

    tenant_id: str
    since: date
    until: date
    audio_seconds: float = Field(description="the total of the entries")
    entries: tuple[UsageEntry, ...]
    quotas: tuple[QuotaStatus, ...] = Field(description="empty: no quota set (unlimited)")
