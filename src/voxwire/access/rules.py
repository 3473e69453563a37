"""Who may connect to the broker and which topics they may use.

Users connect with any username and their API key as password; they may
subscribe to and receive ``transcription/<sid>/...`` only for sessions of their
tenant. Browsers connect with a session token (:mod:`voxwire.access.tokens`) as
password instead, and reach only the sessions it names, until it expires.
voxwire's own components connect as the service principal with a secret made
at start-up, and may use every topic.
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Callable

from voxwire.access.keys import key_id_of
from voxwire.access.principal import Action, Principal
from voxwire.access.tokens import TokenError, TokenIssuer, looks_like_token
from voxwire_client.topics import QUERY_ROOT, ROOT, TopicKind, parse_audio_topic, validate_sid

SERVICE_USER = "voxwire-service"
_KINDS = {"+", *(kind.value for kind in TopicKind)}
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")

KeyLookup = Callable[[str], str | None]
"""API key -> tenant id, or None."""

OwnerLookup = Callable[[str], str | None]
"""Session id -> tenant id, or None."""


class PlatformAuthenticator:
    def __init__(
        self, service_secret: str, tenant_for_key: KeyLookup, tokens: TokenIssuer | None = None
    ) -> None:
        self._secret = service_secret
        self._tenant_for_key = tenant_for_key
        self._tokens = tokens

    def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> Principal | None:
        if not password:
            return None
        if username == SERVICE_USER:
            if hmac.compare_digest(password, self._secret):
                return Principal(name=SERVICE_USER, is_service=True)
            return None
        if self._tokens is not None and looks_like_token(password):
            try:
                grant = self._tokens.verify(password)
            except TokenError:
                return None
            return Principal(name=grant.tenant_id, sids=grant.sids, expires_at=grant.expires_at)
        tenant = self._tenant_for_key(password)
        return Principal(name=tenant, key_id=key_id_of(password)) if tenant else None


class SessionAuthorizer:
    """Tenants reach only their own sessions' result topics; services reach all."""

    def __init__(self, owner_of: OwnerLookup, now: Callable[[], float] = time.time) -> None:
        self._owner_of = owner_of
        self._now = now

    def allow(self, principal: Principal, topic: str, action: Action) -> bool:
        """Publish: audio for an own session (``audio/<sid>/chunk/<n>``, ``.../control``).
        Subscribe/receive: an own session's result topics, or ``transcription/<sid>/+``.
        Queries: a key publishes ``query/<its id>/<qid>/request`` and subscribes to
        ``query/<its id>/<qid>/result`` (or ``query/<its id>/+/result``)."""
        decision = topic_rule(principal, topic, action, self._now())
        if isinstance(decision, bool):
            return decision
        return self._owner_of(decision) == principal.name


def topic_rule(principal: Principal, topic: str, action: Action, now: float) -> bool | str:
    """The rules of :class:`SessionAuthorizer` up to the owner lookup: True or
    False when the topic decides; else the session id whose owner must be the
    principal's tenant (for callers that look owners up themselves)."""
    if principal.is_service:
        return True
    if principal.expires_at is not None and now >= principal.expires_at:
        return False
    if topic.startswith(f"{QUERY_ROOT}/"):
        return _own_query(principal, topic, action)
    try:
        sid = _session_of(topic, action)
    except ValueError:  # not a topic of this kind, or an unsafe session id
        return False
    if principal.sids is not None and sid not in principal.sids:
        return False
    return sid


def _own_query(principal: Principal, topic: str, action: Action) -> bool:
    parts = topic.split("/")
    if len(parts) != 4 or principal.key_id is None or parts[1] != principal.key_id:
        return False
    if action == "publish":
        return parts[3] == "request" and _SAFE.fullmatch(parts[2]) is not None
    return parts[3] == "result" and (parts[2] == "+" or _SAFE.fullmatch(parts[2]) is not None)


def _session_of(topic: str, action: Action) -> str:
    if action == "publish":
        return parse_audio_topic(topic).sid
    parts = topic.split("/")
    if len(parts) != 3 or parts[0] != ROOT or parts[2] not in _KINDS:
        raise ValueError(topic)
    return validate_sid(parts[1])
