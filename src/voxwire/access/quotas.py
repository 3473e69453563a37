"""Quotas: what a tenant (or one of its keys) may use, and the decision whether a
new session fits. Pure code: no store, no clock of its own.

A quota is a named limit (:data:`QUOTA_NAMES`); none set means unlimited, so an
installation that never sets one behaves as before. Limits are kept per tenant
and, optionally, per key (a key's limit applies on top of its tenant's)::

    limits = Limits({"live_streams": 2, "audio_seconds_per_day": 3600})
    use = Use(live_streams=2)
    refusal = decide(limits, use, Ask("live"), now)   # Refusal(quota="live_streams", ...)

:func:`decide` returns the first limit the request would break, as a
:class:`Refusal` naming the quota, the limit, the current use and, for the audio
quotas, when it resets (the next UTC midnight, the first of the next month);
None lets the request go on. :class:`QuotaExceededError` carries a refusal to
the edges (HTTP 429, the MQTT error answer).

What counts: ``live_streams`` are live streams not yet ended, ``uploads_in_flight``
file jobs queued or being transcribed (uploads and re-transcriptions), the audio
quotas the seconds transcribed (the store's usage rows) since the start of the
UTC day or month. The audio quotas are checked when a session starts: a live
stream opened under its quota may run past it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, get_args

from voxwire.core.errors import VoxwireError

QuotaName = Literal[
    "live_streams",
    "uploads_in_flight",
    "audio_seconds_per_day",
    "audio_seconds_per_month",
    "upload_bytes",
    "upload_seconds",
]
QUOTA_NAMES: tuple[QuotaName, ...] = get_args(QuotaName)
"""Every quota, in the order they are checked and shown."""

Scope = Literal["tenant", "key"]
AskKind = Literal["live", "upload", "decoded", "retranscription"]
"""What starts: a live stream, an upload (checked before it is decoded), an upload's
decoded audio (only its length is checked) or a re-transcription."""

UNITS: Mapping[QuotaName, str] = {
    "live_streams": "streams",
    "uploads_in_flight": "jobs",
    "audio_seconds_per_day": "seconds",
    "audio_seconds_per_month": "seconds",
    "upload_bytes": "bytes",
    "upload_seconds": "seconds",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of one scope (a tenant, or a key): name -> limit; absent: unlimited."""

    values: Mapping[QuotaName, int] = field(default_factory=dict)

    def get(self, name: QuotaName) -> int | None:
        return self.values.get(name)

    def __bool__(self) -> bool:
        return bool(self.values)


@dataclass(frozen=True, slots=True)
class Use:
    """What a scope uses now."""

    live_streams: int = 0
    uploads_in_flight: int = 0
    audio_seconds_today: float = 0.0
    audio_seconds_month: float = 0.0

    def of(self, name: QuotaName) -> float:
        """The current use a quota is held against (0 for the per-request ones)."""
        return {
            "live_streams": self.live_streams,
            "uploads_in_flight": self.uploads_in_flight,
            "audio_seconds_per_day": self.audio_seconds_today,
            "audio_seconds_per_month": self.audio_seconds_month,
        }.get(name, 0.0)


@dataclass(frozen=True, slots=True)
class Ask:
    """A session about to start: its kind and, where known, its size (``upload``)
    and length (``decoded``)."""

    kind: AskKind
    upload_bytes: int | None = None
    upload_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request over a quota."""

    quota: QuotaName
    scope: Scope
    limit: int
    used: float
    """The current use (for upload_bytes / upload_seconds: the request's own)."""
    resets_at: datetime | None = None
    """When the use falls back to zero (audio quotas); None: when sessions end."""

    @property
    def message(self) -> str:
        unit = UNITS[self.quota]
        whose = "the tenant's" if self.scope == "tenant" else "the API key's"
        if self.quota in ("upload_bytes", "upload_seconds"):
            size = f"{self.used:g} {unit}"
            return f"{whose} {self.quota} quota is {self.limit} {unit}; this upload has {size}"
        return f"{whose} {self.quota} quota of {self.limit} {unit} is used up ({self.used:g} used)"

    @property
    def hint(self) -> str:
        if self.resets_at is not None:
            return f"it resets at {self.resets_at:%Y-%m-%d %H:%M} UTC; or ask the operator"
        if self.quota in ("live_streams", "uploads_in_flight"):
            return "wait for a session to finish, or ask the operator to raise the quota"
        return "send a smaller file, or ask the operator to raise the quota"


class QuotaExceededError(VoxwireError):
    """A session refused because it would exceed a quota (HTTP 429)."""

    code = "quota_exceeded"

    def __init__(self, refusal: Refusal, *, sid: str | None = None) -> None:
        super().__init__(refusal.message, hint=refusal.hint, sid=sid)
        self.refusal = refusal

    def retry_after_s(self, now: datetime) -> float | None:
        """Seconds until the quota resets; None when it does not at a set time."""
        at = self.refusal.resets_at
        return None if at is None else max(0.0, (at - now).total_seconds())


def day_start(now: datetime) -> date:
    return now.astimezone(UTC).date()


def month_start(now: datetime) -> date:
    return day_start(now).replace(day=1)


def resets_at(name: QuotaName, now: datetime) -> datetime | None:
    """When the use of ``name`` falls back to zero (UTC), None for the others."""
    today = day_start(now)
    if name == "audio_seconds_per_day":
        return datetime.combine(today + timedelta(days=1), time(), UTC)
    if name == "audio_seconds_per_month":
        first = today.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        return datetime.combine(following, time(), UTC)
    return None


def _applies(name: QuotaName, ask: Ask) -> bool:
    if name == "live_streams":
        return ask.kind == "live"
    if name == "uploads_in_flight":
        return ask.kind in ("upload", "retranscription")
    if name == "upload_bytes":
        return ask.kind == "upload" and ask.upload_bytes is not None
    if name == "upload_seconds":
        return ask.kind == "decoded" and ask.upload_seconds is not None
    return ask.kind != "decoded"  # the audio quotas


def decide_scope(
    limits: Limits, use: Use, ask: Ask, now: datetime, scope: Scope = "tenant"
) -> Refusal | None:
    """The first quota of one scope that ``ask`` would break, else None."""
    for name in QUOTA_NAMES:
        limit = limits.get(name)
        if limit is None or not _applies(name, ask):
            continue
        if name == "upload_bytes":
            over, used = (ask.upload_bytes or 0) > limit, float(ask.upload_bytes or 0)
        elif name == "upload_seconds":
            over, used = (ask.upload_seconds or 0) > limit, round(ask.upload_seconds or 0, 1)
        else:
            used = use.of(name)
            over = used >= limit
        if over:
            return Refusal(name, scope, limit, used, resets_at(name, now))
    return None


def decide(
    limits: Limits,
    use: Use,
    ask: Ask,
    now: datetime,
    *,
    key_limits: Limits | None = None,
    key_use: Use | None = None,
) -> Refusal | None:
    """Whether ``ask`` fits the tenant's quotas, then its key's: None, or the refusal."""
    refusal = decide_scope(limits, use, ask, now, "tenant")
    if refusal is None and key_limits:
        refusal = decide_scope(key_limits, key_use or Use(), ask, now, "key")
    return refusal


def parse_name(text: str) -> QuotaName:
    """A quota's name as typed (dashes allowed); ValueError lists the names."""
    name = text.strip().lower().replace("-", "_")
    for known in QUOTA_NAMES:
        if known == name:
            return known
    raise ValueError(f"no quota {text!r}: one of {', '.join(QUOTA_NAMES)}")
