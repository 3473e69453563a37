"""Who may connect to the broker and which topics they may use.

Users connect with any username and their API key as password; they may
subscribe to and receive ``transcription/<sid>/...`` only for sessions of their
tenant, and a device key only for the sessions it opened itself. Browsers
connect with a session token (:mod:`voxwire.access.tokens`) as password
instead, and reach only the sessions it names, until it expires.
voxwire's own components connect as the service principal with a secret made
at start-up, and may use every topic. A client id held by one principal's
session is not given to another.

Both classes await their lookups (``Store.key_grant``,
``Store.session_owner``), so they work over any store; the authorizer keeps
found session owners for a short while (:mod:`voxwire.access.owners`).
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from voxwire.access.keys import KeyGrant, key_id_of
from voxwire.access.owners import OWNER_TTL_S, CachedOwners, OwnerLookup, SessionOwner
from voxwire.access.principal import Action, Principal
from voxwire.access.tokens import TokenError, TokenIssuer, looks_like_token
from voxwire_client.topics import (
    QUERY_ROOT,
    ROOT,
    TopicKind,
    audio_chunk_prefix,
    audio_control_topic,
    parse_audio_topic,
    parse_query_topic,
    session_filter,
    validate_sid,
)

SERVICE_USER = "voxwire-service"
_KINDS = {"+", *(kind.value for kind in TopicKind)}
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")

KeyLookup = Callable[[str], Awaitable[KeyGrant | None]]
"""API key -> what it acts as, or None (``Store.key_grant``)."""


def key_principal(grant: KeyGrant) -> Principal:
    """Who a client is that connected with the key of ``grant``."""
    return Principal(name=grant.tenant_id, key_id=grant.key_id, device=grant.device)


def owns(principal: Principal, owner: SessionOwner | None) -> bool:
    """Whether a session of ``owner`` is ``principal``'s: one of its tenant's, and
    for a device key one it opened itself."""
    if owner is None or owner.tenant_id != principal.name:
        return False
    return not principal.device or owner.key_id == principal.key_id


def may_take_client_id(principal: Principal, holder: Principal | None) -> bool:
    """Whether ``principal`` may connect with a client id whose session ``holder``
    has (None: no session): only its own, so one user cannot take over another
    user's session and its subscriptions (nor one device's to another key)."""
    if holder is None:
        return True
    if holder.device or principal.device:
        return holder.name == principal.name and holder.key_id == principal.key_id
    return holder.name == principal.name


class PlatformAuthenticator:
    """The service user by its secret, a session token, or an API key.

    ``key_id_as_username``: a key is accepted only with its id as username
    (EMQX's authorizer sees the username, never the password, so it must name
    the key).
    """

    def __init__(
        self,
        service_secret: str,
        grant_for_key: KeyLookup,
        tokens: TokenIssuer | None = None,
        *,
        key_id_as_username: bool = False,
    ) -> None:
        self._secret = service_secret.encode()
        self._grant_for_key = grant_for_key
        self._tokens = tokens
        self._key_id_as_username = key_id_as_username

    async def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> Principal | None:
        if not password:
            return None
        if username == SERVICE_USER:
            if self._secret and hmac.compare_digest(password.encode(), self._secret):
                return Principal(name=SERVICE_USER, is_service=True)
            return None
        if self._tokens is not None and looks_like_token(password):
            try:
                grant = self._tokens.verify(password)
            except TokenError:
                return None
            return Principal(name=grant.tenant_id, sids=grant.sids, expires_at=grant.expires_at)
        key_id = key_id_of(password)
        if self._key_id_as_username and (key_id is None or username != key_id):
            return None
        found = await self._grant_for_key(password)
        return key_principal(found) if found else None


class SessionAuthorizer:
    """Tenants reach only their own sessions' result topics (a device key only the
    sessions it opened); services reach all.

    Called per message and subscriber: found session owners are kept
    ``owner_ttl_s`` (0: ask the lookup every time), see :mod:`voxwire.access.owners`.
    """

    def __init__(
        self,
        owner_of: OwnerLookup,
        now: Callable[[], float] = time.time,
        *,
        owner_ttl_s: float = OWNER_TTL_S,
    ) -> None:
        self._owner_of = CachedOwners(owner_of, ttl_s=owner_ttl_s)
        self._now = now

    async def allow(self, principal: Principal, topic: str, action: Action) -> bool:
        """Publish: audio for an own session (``audio/<sid>/chunk/<n>``, ``.../control``).
        Subscribe/receive: an own session's result topics, or ``transcription/<sid>/+``.
        Queries: a key publishes ``query/<its id>/<qid>/request`` and the parts of
        files it uploads over MQTT, ``query/<its id>/<upload id>/part/<n>``, and
        subscribes to ``query/<its id>/<qid>/result`` (or ``query/<its id>/+/result``)."""
        decision = topic_rule(principal, topic, action, self._now())
        if isinstance(decision, bool):
            return decision
        return owns(principal, await self._owner_of(decision))


TopicGrant = tuple[Literal["publish", "subscribe"], str]
"""An action and the topic (filter) it is allowed on."""


def token_grants(sids: frozenset[str]) -> list[TopicGrant]:
    """What a session token naming ``sids`` may do, as topic filters, for brokers
    given a client's rules up front (EMQX's per-client ACL); :func:`topic_rule`
    allows the same, checked per topic."""
    return [
        grant
        for sid in sorted(sids)
        for grant in (
            ("subscribe", session_filter(sid)),
            ("publish", f"{audio_chunk_prefix(sid)}/+"),
            ("publish", audio_control_topic(sid)),
        )
    ]


def topic_rule(principal: Principal, topic: str, action: Action, now: float) -> bool | str:
    """The rules of :class:`SessionAuthorizer` up to the owner lookup: True or
    False when the topic decides; else the session id whose owner must be the
    principal (:func:`owns`; for callers that look owners up themselves)."""
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
    if len(parts) == 5 and action == "publish":  # a part of a file uploaded over MQTT
        try:
            return parse_query_topic(topic).key_id == principal.key_id
        except ValueError:
            return False
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
