"""EMQX asks the gateway who may connect and what they may do.

EMQX's HTTP authenticator and HTTP authorizer call these routes with the
request bodies configured in ``emqx/emqx.conf`` (each a JSON object of
EMQX placeholders)::

    POST /internal/emqx/authn  {"clientid": "${clientid}", "username": "${username}",
                                "password": "${password}", "peerhost": "${peerhost}"}
    POST /internal/emqx/authz  {"clientid": "${clientid}", "username": "${username}",
                                "topic": "${topic}", "action": "${action}"}

and take the answer from the JSON body (status 200): ``{"result": "allow" |
"deny"}``, for authentication also ``is_superuser``, ``acl`` and ``expire_at``
(EMQX 5.8+). The rules are the embedded broker's, and every decision is made
by :mod:`voxwire.access.rules`; this module only translates EMQX's requests:

- voxwire's service user: allowed, superuser;
- an API key: the username must be the key's id (so the authorizer, which
  sees no password, knows the key); topics are then decided per request by
  the authorizer: the tenant's own sessions (a device key's: those it opened),
  the key's own query topics;
- a session token (:mod:`voxwire.access.tokens`): allowed until it expires
  (``expire_at``), with an ``acl`` naming exactly its sessions' topics and
  denying everything else, so the authorizer is never asked.

Anything else is denied. The routes exist only when the ``hook_secret``
setting is set, and EMQX must send it: ``Authorization: Bearer <secret>``.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header
from pydantic import BaseModel, ConfigDict, SecretStr

from voxwire.access.principal import Principal
from voxwire.access.rules import (
    PlatformAuthenticator,
    SessionAuthorizer,
    key_principal,
    token_grants,
)
from voxwire.access.tokens import TokenIssuer
from voxwire.core.errors import AuthError
from voxwire.store import Store


class AuthnRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    clientid: str
    username: str = ""
    password: str = ""
    peerhost: str = ""


class AuthzRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    clientid: str
    username: str = ""
    topic: str
    action: Literal["publish", "subscribe", "all"]


class AclRule(BaseModel):
    permission: Literal["allow", "deny"]
    action: Literal["publish", "subscribe", "all"]
    topic: str


class AuthnResponse(BaseModel):
    result: Literal["allow", "deny"]
    is_superuser: bool = False
    acl: list[AclRule] | None = None
    expire_at: int | None = None


class AuthzResponse(BaseModel):
    result: Literal["allow", "deny"]


DENY = AuthnResponse(result="deny")


def emqx_hooks(
    store: Store, tokens: TokenIssuer, hook_secret: SecretStr, service_password: SecretStr
) -> APIRouter:
    async def from_emqx(authorization: Annotated[str, Header()] = "") -> None:
        expected = f"Bearer {hook_secret.get_secret_value()}"
        if not hmac.compare_digest(authorization.encode(), expected.encode()):
            raise AuthError("not EMQX", hint="send the hook_secret as a bearer token")

    router = APIRouter(prefix="/internal/emqx", tags=["emqx"], dependencies=[Depends(from_emqx)])

    authenticator = PlatformAuthenticator(
        service_password.get_secret_value(),
        store.key_grant,
        tokens,
        key_id_as_username=True,
    )
    authorizer = SessionAuthorizer(store.session_owner)

    @router.post("/authn", response_model=AuthnResponse, response_model_exclude_none=True)
    async def authenticate(request: AuthnRequest) -> AuthnResponse:
        principal = await authenticator.authenticate(
            request.clientid, request.username, request.password
        )
        if principal is None:
            return DENY
        if principal.is_service:
            return AuthnResponse(result="allow", is_superuser=True)
        if principal.sids is not None:
            return _token_answer(principal, principal.sids)
        return AuthnResponse(result="allow")

    @router.post("/authz", response_model=AuthzResponse)
    async def authorize(request: AuthzRequest) -> AuthzResponse:
        grant = await store.active_key(request.username) if request.username else None
        if grant is None or request.action == "all":
            return AuthzResponse(result="deny")
        principal = key_principal(grant)
        allowed = await authorizer.allow(principal, request.topic, request.action)
        return AuthzResponse(result="allow" if allowed else "deny")

    return router


def _token_answer(principal: Principal, sids: frozenset[str]) -> AuthnResponse:
    """A session token's grants as EMQX's per-client ACL, everything else denied."""
    acl = [
        AclRule(permission="allow", action=action, topic=topic)
        for action, topic in token_grants(sids)
    ]
    acl.append(AclRule(permission="deny", action="all", topic="#"))
    expires_at = None if principal.expires_at is None else int(principal.expires_at)
    return AuthnResponse(result="allow", acl=acl, expire_at=expires_at)
