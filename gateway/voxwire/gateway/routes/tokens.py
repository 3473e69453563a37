"""``POST /v1/tokens``: session tokens for browsers (:mod:`voxwire.access.tokens`)."""

from __future__ import annotations

from fastapi import APIRouter

from voxwire.gateway.auth import Caller, session_of
from voxwire.gateway.context import GatewayDep
from voxwire_client.api import ErrorBody, TokenRequest, TokenResponse

router = APIRouter(tags=["tokens"])


@router.post(
    "/v1/tokens",
    status_code=201,
    response_model=TokenResponse,
    responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}},
)
async def create_token(caller: Caller, request: TokenRequest, gateway: GatewayDep) -> TokenResponse:
    """A short-lived token for a browser: it connects to the broker with it as
    password and may follow (and stream audio to) only these sessions."""
    for sid in request.sids:
        await session_of(gateway, sid, caller.id)
    grant = gateway.tokens.issue(caller.id, list(request.sids), request.ttl_s)
    await gateway.ctx.access.add_token(grant)
    return TokenResponse(
        token=grant.token,
        username=grant.username,
        sids=tuple(sorted(grant.sids)),
        expires_at=grant.expires_at,
        ws_url=gateway.ctx.settings.broker_urls[1],
    )
