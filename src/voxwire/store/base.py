"""The store interface and its typed records."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal, Protocol

from voxwire.access.keys import KeyGrant, KeyRole, NewKey
from voxwire.access.owners import SessionOwner
from voxwire.access.quotas import QuotaName, Use
from voxwire.store.webhooks import WebhookStore
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import (
    MatchData,
    Message,
    SegmentData,
    SessionStatus,
    TranscriptMessage,
)


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    id: str
    tenant_id: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    role: KeyRole = "tenant"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    sid: str
    tenant_id: str
    status: SessionStatus
    created_at: datetime
    filename: str | None = None
    duration_ms: int = 0
    percent: float = 0.0
    last_seq: int = 0
    prompts: tuple[PromptSpec, ...] = ()
    language: str | None = None
    text: str = ""
    error_code: str | None = None
    error_message: str | None = None
    key_id: str | None = None
    """The API key that opened the session (None: a session token, or made before
    keys were recorded); a device key reaches only the sessions it opened."""
    version: int = 1
    """The latest transcript version asked for (2 and up: re-transcriptions)."""
    kind: SessionKind = "file"
    """An uploaded file or a live stream (sessions stored before the kind was:
    a live stream when it has no file name)."""

    @property
    def owner(self) -> SessionOwner:
        return SessionOwner(self.tenant_id, self.key_id)


SessionKind = Literal["file", "live"]
UsageKind = Literal["file", "live", "retranscription"]


@dataclass(frozen=True, slots=True)
class QuotaSetting:
    """One quota set for a tenant, or for one of its keys (``key_id``)."""

    tenant_id: str
    key_id: str | None
    name: QuotaName
    value: int


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Audio transcribed on one UTC day, by tenant, key, model and kind, summed."""

    day: date
    tenant_id: str
    key_id: str | None
    model: str
    kind: UsageKind
    audio_seconds: float
    sessions: int


@dataclass(frozen=True, slots=True)
class Reopened:
    """A session reopened for its next transcript version, and the redaction it
    was opened with (None: opened before redaction was recorded)."""

    session: SessionRecord
    redact: RedactMode | None


@dataclass(frozen=True, slots=True)
class SessionState:
    """A session as stored, tombstoned or not: a deleted session is read by no one
    but the deletion, which needs its owner and how far it got."""

    session: SessionRecord
    deleted_at: datetime | None = None
    """When it was tombstoned (None: not deleted)."""
    reason: str | None = None
    """Why it was deleted: ``request`` or ``retention``."""
    purged_at: datetime | None = None
    """When its deletion finished (None: not yet, or not deleted)."""


def by_version(transcripts: Iterable[TranscriptMessage]) -> list[TranscriptMessage]:
    """The last ``transcript`` of each version, in version order (given in seq order)."""
    latest = {t.version: t for t in transcripts}
    return [latest[v] for v in sorted(latest)]


class Store(WebhookStore, Protocol):
    """The store; its webhook deliveries and secrets: :class:`WebhookStore`."""

    # tenants and keys
    async def create_tenant(self, name: str) -> Tenant: ...
    async def get_tenant(self, tenant_id: str) -> Tenant | None: ...
    async def tenant_by_name(self, name: str) -> Tenant | None: ...
    async def add_api_key(
        self, tenant_id: str, key: NewKey, label: str, role: KeyRole = "tenant"
    ) -> ApiKeyInfo: ...
    async def list_api_keys(self) -> list[ApiKeyInfo]: ...
    async def revoke_api_key(self, key_id: str) -> bool: ...
    async def verify_api_key(self, plaintext: str) -> Tenant | None: ...
    async def active_key(self, key_id: str) -> KeyGrant | None:
        """What an active (not revoked) key acts as, by its id."""
        ...

    async def key_issued(self, key_id: str) -> bool:
        """Whether this installation ever issued key ``key_id`` (revoked or not)."""
        ...

    async def key_grant(self, plaintext: str) -> KeyGrant | None:
        """What a valid, active key acts as, by the key itself (the gateway, the brokers)."""
        ...

    # sessions
    async def create_session(
        self, session: SessionRecord, redact: RedactMode | None = None
    ) -> None:
        """Record a new session, opened with ``redact`` (kept for its re-transcriptions)."""
        ...

    async def get_session(self, sid: str) -> SessionRecord | None: ...
    async def session_owner(self, sid: str) -> SessionOwner | None:
        """The tenant and key owning session ``sid`` (for the brokers' topic checks)."""
        ...

    async def list_sessions(self, tenant_id: str, limit: int = 100) -> list[SessionRecord]: ...
    async def all_sessions(self, after: str = "", limit: int = 500) -> list[SessionRecord]:
        """Sessions of every tenant with a sid after ``after``, in sid order."""
        ...

    async def count_sessions(self) -> int: ...

    # the message log: every message the session published, by seq
    async def record_message(self, message: Message) -> bool:
        """Store and apply ``message``; False when its ``seq`` was already stored."""
        ...

    async def record_messages(self, messages: list[Message]) -> int:
        """Store a batch in one transaction; returns how many were new."""
        ...

    async def messages_after(self, sid: str, after: int, limit: int = 1000) -> list[Message]: ...
    async def segments(self, sid: str) -> list[SegmentData]: ...
    async def matches(self, sid: str) -> list[MatchData]: ...

    # transcript versions (re-transcription)
    async def reopen_session(self, sid: str) -> Reopened | None:
        """Queue session ``sid`` for its next transcript version: a finished
        (completed or failed) session becomes ``queued`` with ``version`` one more,
        atomically; None when it is not finished (or unknown)."""
        ...

    async def transcript_versions(self, sid: str) -> list[TranscriptMessage]:
        """The ``transcript`` message of each version published, by version (the
        last one of a version, should it have been published twice)."""
        ...

    # quotas and usage (voxwire.access.quotas); usage rows are written with the
    # transcript they count, once per (sid, version)
    async def list_tenants(self) -> list[Tenant]: ...
    async def set_quota(
        self, tenant_id: str, key_id: str | None, name: QuotaName, value: int
    ) -> None:
        """Set one quota of the tenant (``key_id``: of that key only)."""
        ...

    async def clear_quotas(
        self, tenant_id: str, key_id: str | None, names: Collection[QuotaName] = ()
    ) -> int:
        """Remove quotas of the tenant or key (``names``: those only, else all); how many."""
        ...

    async def quotas(self, tenant_id: str) -> list[QuotaSetting]:
        """The quotas set for the tenant and each of its keys."""
        ...

    async def quota_use(self, tenant_id: str, key_id: str | None, today: date) -> Use:
        """What the tenant (``key_id``: that key) uses now: sessions under way and the
        audio seconds of ``today`` and its month."""
        ...

    async def usage(self, tenant_id: str | None, since: date, until: date) -> list[UsageRow]:
        """Usage from ``since`` to ``until`` (days, both included), of one tenant or all."""
        ...

    # deletion: a tombstone first, then the session's data, then the deletion finished
    async def session_state(self, sid: str) -> SessionState | None:
        """Session ``sid`` as stored, tombstoned or not (None: never stored)."""
        ...

    async def mark_deleted(self, sid: str, reason: str) -> bool:
        """Tombstone ``sid``: from now on it reads as missing. True when this call
        tombstoned it (False: unknown, or tombstoned before; a claim for sweepers)."""
        ...

    async def purge_session(self, sid: str) -> None:
        """Remove the session's message log, segments, matches and transcripts, and
        blank its content (file name, text, prompts, errors); idempotent."""
        ...

    async def finish_deletion(self, sid: str) -> bool:
        """Record that nothing of tombstoned ``sid`` is left; False if it was already."""
        ...

    async def unfinished_deletions(self, before: datetime, limit: int = 100) -> list[str]:
        """Sids tombstoned before ``before`` whose deletion has not finished."""
        ...

    async def sessions_created_before(self, before: datetime, limit: int = 100) -> list[str]:
        """Sids of sessions (not tombstoned) created before ``before``, oldest first."""
        ...

    async def deleted_among(self, sids: Collection[str]) -> set[str]:
        """Which of ``sids`` are tombstoned."""
        ...

    async def close(self) -> None: ...
