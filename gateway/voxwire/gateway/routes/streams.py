"""Live streams: ``POST /v1/streams`` opens one (its audio then comes over MQTT)
and ``POST /v1/sessions/{sid}/prompts`` changes its standing prompts."""

from __future__ import annotations

from fastapi import APIRouter

from voxwire.gateway.auth import AnyKey, Owned
from voxwire.gateway.context import GatewayDep
from voxwire.sessions.views import stream_created
from voxwire_client.api import ErrorBody, PromptChange, StreamCreated, StreamRequest

router = APIRouter(tags=["streams"])


@router.post(
    "/v1/streams",
    status_code=201,
    response_model=StreamCreated,
    responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def create_stream(
    caller: AnyKey, request: StreamRequest, gateway: GatewayDep
) -> StreamCreated:
    """Start a live stream; then publish audio chunks over MQTT. Device keys may."""
    tenant_of, key = caller
    session = await gateway.streams.start(tenant_of, request, key=key)
    return stream_created(gateway.ctx.settings, session)


@router.post(
    "/v1/sessions/{sid}/prompts",
    status_code=202,
    response_model=PromptChange,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def change_prompts(session: Owned, change: PromptChange, gateway: GatewayDep) -> PromptChange:
    """Add or remove standing prompts of a live stream (applied from its next final)."""
    await gateway.streams.change_prompts(session, change)
    return change
