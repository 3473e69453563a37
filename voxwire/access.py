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
from voxwire_client.topics import ROOT, TopicKind, parse_audio_topic, validate_sid

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
        """Publish: audio for an own session (``audio/<sid>/chunk/<n>``, ``.../control``).
        Subscribe/receive: an own session's result topics, or ``transcription/<sid>/+``."""
        if principal.is_service:
            return True
        try:
            sid = self._session_of(topic, action)
        except ValueError:  # not a topic of this kind, or an unsafe session id
            return False
        return self._owner_of(sid) == principal.name

    @staticmethod
    def _session_of(topic: str, action: Action) -> str:
        if action == "publish":
            return parse_audio_topic(topic).sid
        parts = topic.split("/")
        if len(parts) != 3 or parts[0] != ROOT or parts[2] not in _KINDS:
            raise ValueError(topic)
        return validate_sid(parts[1])
