"""Who may connect to the broker and which topics they may use.

Users connect with any username and their API key as password; they may
subscribe to and receive ``transcription/<sid>/...`` only for sessions of their
tenant. voxwire's own components connect as the service principal with a
secret made at start-up, and may use every topic.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from voxwire.broker.embedded import Action, Principal
from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.topics import ROOT, TopicKind, validate_sid

SERVICE_USER = "voxwire-service"
_KINDS = {"+", *(kind.value for kind in TopicKind)}

KeyLookup = Callable[[str], str | None]
"""API key -> tenant id, or None."""

OwnerLookup = Callable[[str], str | None]
"""Session id -> tenant id, or None."""


class PlatformAuthenticator:
    def __init__(self, service_secret: str, tenant_for_key: KeyLookup) -> None:
        self._secret = service_secret
        self._tenant_for_key = tenant_for_key

    def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> Principal | None:
        if not password:
            return None
        if username == SERVICE_USER:
            if hmac.compare_digest(password, self._secret):
                return Principal(name=SERVICE_USER, is_service=True)
            return None
        tenant = self._tenant_for_key(password)
        return Principal(name=tenant) if tenant else None


class SessionAuthorizer:
    """Tenants reach only their own sessions' result topics; services reach all."""

    def __init__(self, owner_of: OwnerLookup) -> None:
        self._owner_of = owner_of

    def allow(self, principal: Principal, topic: str, action: Action) -> bool:
        if principal.is_service:
            return True
        parts = topic.split("/")
        if action == "publish":
            return self._may_publish(principal, parts)
        if len(parts) != 3 or parts[0] != ROOT or parts[2] not in _KINDS:
            return False
        try:
            sid = validate_sid(parts[1])
        except InvalidSessionIdError:
            return False
        return self._owner_of(sid) == principal.name

    def _may_publish(self, principal: Principal, parts: list[str]) -> bool:
        """Devices publish audio for their own sessions: ``audio/<sid>/chunk/<n>``
        and ``audio/<sid>/control``."""
        chunk = len(parts) == 4 and parts[2] == "chunk" and parts[3].isdigit()
        control = len(parts) == 3 and parts[2] == "control"
        if parts[0] != "audio" or not (chunk or control):
            return False
        try:
            sid = validate_sid(parts[1])
        except InvalidSessionIdError:
            return False
        return self._owner_of(sid) == principal.name
