"""``POST /v1/search``: search the caller's transcripts."""

from __future__ import annotations

from fastapi import APIRouter

from voxwire.gateway.auth import Caller
from voxwire.gateway.context import GatewayDep
from voxwire_client.api import ErrorBody, SearchPage, SearchQuery

router = APIRouter(tags=["search"])


@router.post(
    "/v1/search",
    response_model=SearchPage,
    responses={400: {"model": ErrorBody}, 401: {"model": ErrorBody}},
)
async def search(caller: Caller, query: SearchQuery, gateway: GatewayDep) -> SearchPage:
    """Segments of the caller's transcripts that answer the query, best first."""
    return await gateway.ctx.search.search(caller.id, query)
