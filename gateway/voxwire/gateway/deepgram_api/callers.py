"""Who calls a Deepgram route: a voxwire API key, sent as Deepgram's clients send
theirs: ``Authorization: Token <key>`` (or ``Bearer <key>``, or ``X-API-Key``),
or, on a WebSocket a browser opens (it cannot set headers), as the subprotocols
``token, <key>``. Every call takes one from its tenant's rate limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from voxwire.access.keys import KeyGrant
from voxwire.gateway.auth import take
from voxwire.gateway.context import Gateway
from voxwire.gateway.deepgram_api.errors import invalid_auth
from voxwire.store import Tenant

SCHEMES = ("token", "bearer")


def header_credential(headers: Mapping[str, str]) -> str | None:
    """The key in ``Authorization: Token|Bearer <key>`` or ``X-API-Key``."""
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() in SCHEMES and value.strip():
        return value.strip()
    return headers.get("x-api-key") or None


def subprotocol_credential(offered: Sequence[str]) -> str | None:
    """The key in the subprotocols ``token, <key>`` (or ``bearer, <key>``)."""
    if len(offered) >= 2 and offered[0].strip().lower() in SCHEMES:
        return offered[1].strip() or None
    return None


async def caller(gateway: Gateway, credential: str | None) -> tuple[Tenant, KeyGrant]:
    """The key's tenant and grant; Deepgram's 401 for none, an unknown or revoked key."""
    store = gateway.ctx.store
    grant = await store.key_grant(credential) if credential else None
    tenant = await store.get_tenant(grant.tenant_id) if grant else None
    if grant is None or tenant is None:
        raise invalid_auth()
    take(gateway, tenant.id, tenant.name)
    return tenant, grant
