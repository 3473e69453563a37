"""The store interface and its typed records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from voxwire.access.keys import KeyGrant, KeyRole, NewKey
from voxwire.access.owners import SessionOwner
from voxwire_client.api import MatchData, PromptSpec
from voxwire_client.messages import Message, SegmentData, SessionStatus


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

    @property
    def owner(self) -> SessionOwner:
        return SessionOwner(self.tenant_id, self.key_id)


class Store(Protocol):
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
    async def create_session(self, session: SessionRecord) -> None: ...
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

    async def close(self) -> None: ...
