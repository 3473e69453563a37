"""Who calls: the API key or session token of a request, as FastAPI dependencies.

Every API route but health and metrics needs an API key: ``Authorization:
Bearer <key>`` or ``X-API-Key: <key>``. The routes of one session
(``/v1/sessions/{sid}...``, :data:`Owned`) also take a session token from
``POST /v1/tokens`` that names it. A device key
(:data:`~voxwire.access.keys.KeyRole`) may only open sessions (:data:`AnyKey`:
``POST /v1/streams``, ``POST /v1/sessions``) and use the routes of the sessions
it opened; anything else (:data:`Caller`) answers 403. Every authenticated
request takes one from its tenant's rate limit.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from voxwire.access.keys import KeyGrant, device_refusal
from voxwire.access.rules import key_principal, owns
from voxwire.access.tokens import looks_like_token
from voxwire.core.errors import AuthError, NotFoundError
from voxwire.core.metrics import RATE_LIMITED
from voxwire.core.ratelimit import RateLimitedError
from voxwire.gateway.context import Gateway, GatewayDep
from voxwire.store import SessionRecord, SessionState, Tenant
from voxwire_client.topics import validate_sid


def take(gateway: Gateway, tenant_id: str, name: str) -> None:
    """One request of the tenant's rate limit (none left: :class:`RateLimitedError`)."""
    if wait := gateway.limits.take(tenant_id):
        RATE_LIMITED.inc()
        raise RateLimitedError(f"too many requests for tenant {name}", retry_after_s=wait)


async def api_key(request: Request, gateway: GatewayDep) -> tuple[Tenant, KeyGrant]:
    """The caller's tenant and key, of any role."""
    credential = _credential(request)
    store = gateway.ctx.store
    grant = await store.key_grant(credential) if credential else None
    found = await store.get_tenant(grant.tenant_id) if grant else None
    if grant is None or found is None:
        raise AuthError(
            "missing or invalid API key",
            hint="send 'Authorization: Bearer <key>'; create a key with `voxwire keys create`",
        )
    take(gateway, found.id, found.name)
    return found, grant


async def tenant(request: Request, gateway: GatewayDep) -> Tenant:
    """The caller's tenant, for a tenant key (a device key: 403)."""
    found, grant = await api_key(request, gateway)
    if grant.device:
        raise device_refusal(f"{request.method} {request.url.path}")
    return found


async def session_of(
    gateway: Gateway, sid: str, tenant_id: str, key: KeyGrant | None = None
) -> SessionRecord:
    """Session ``sid`` of ``tenant_id`` (with a device ``key``: one it opened)."""
    validate_sid(sid)
    session = await gateway.ctx.store.get_session(sid)
    if session is None or session.tenant_id != tenant_id:
        raise NotFoundError(f"no session {sid}", sid=sid)
    if key is not None and not owns(key_principal(key), session.owner):
        raise NotFoundError(
            f"no session {sid} for this device key",
            hint="a device key reaches only the sessions it opened",
            sid=sid,
        )
    return session


async def state_of(gateway: Gateway, sid: str, tenant: Tenant, key: KeyGrant) -> SessionState:
    """Session ``sid`` as stored, deleted or not, for its owner: its tenant's key
    (a device key: a session it opened); anyone else is told there is none."""
    validate_sid(sid)
    state = await gateway.ctx.store.session_state(sid)
    if (
        state is None
        or state.session.tenant_id != tenant.id
        or (key.device and not owns(key_principal(key), state.session.owner))
    ):
        raise NotFoundError(f"no session {sid}", sid=sid)
    return state


async def session_access(sid: str, request: Request, gateway: GatewayDep) -> SessionRecord:
    """The session, for its API key's tenant (a device key: a session it opened)
    or for a session token naming it."""
    credential = _credential(request)
    if credential is None or not looks_like_token(credential):
        found, key = await api_key(request, gateway)
        return await session_of(gateway, sid, found.id, key)
    grant = gateway.tokens.verify(credential)
    if sid not in grant.sids:
        raise NotFoundError(f"no session {sid} for this token", sid=sid)
    take(gateway, grant.tenant_id, grant.tenant_id)
    return await session_of(gateway, sid, grant.tenant_id)


def is_session_token(request: Request) -> bool:
    """Whether the request's credential is a session token (not an API key)."""
    credential = _credential(request)
    return credential is not None and looks_like_token(credential)


AnyKey = Annotated[tuple[Tenant, KeyGrant], Depends(api_key)]
Caller = Annotated[Tenant, Depends(tenant)]
Owned = Annotated[SessionRecord, Depends(session_access)]


def _credential(request: Request) -> str | None:
    """An API key or a session token: ``Authorization: Bearer`` or ``X-API-Key``."""
    header = request.headers.get("authorization", "")
    found = header[7:].strip() if header.lower().startswith("bearer ") else None
    return found or request.headers.get("x-api-key") or None
