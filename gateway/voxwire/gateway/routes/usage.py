"""``GET /v1/usage``: the caller's tenant's usage by day, model and kind, and its
quotas with their current use (:mod:`voxwire_client.usage`)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from voxwire.core.errors import InvalidRequestError
from voxwire.gateway.auth import Caller
from voxwire.gateway.context import GatewayDep
from voxwire_client.api import ErrorBody
from voxwire_client.usage import UsageEntry, UsageReport

router = APIRouter(tags=["usage"])

MAX_DAYS = 366
"""The longest range one request may ask for."""


@router.get(
    "/v1/usage",
    response_model=UsageReport,
    responses={400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 403: {"model": ErrorBody}},
)
async def usage(
    caller: Caller,
    gateway: GatewayDep,
    since: Annotated[
        date | None, Query(description="first UTC day (YYYY-MM-DD); default: this month's first")
    ] = None,
    until: Annotated[date | None, Query(description="last UTC day; default: today")] = None,
) -> UsageReport:
    """Audio transcribed by the caller's tenant, and its quotas. Tenant keys only."""
    today = datetime.now(UTC).date()
    until = until or today
    since = since or until.replace(day=1)
    if since > until or until - since > timedelta(days=MAX_DAYS):
        raise InvalidRequestError(
            f"since {since} to until {until} is not a range of at most {MAX_DAYS} days",
            hint="give since <= until, e.g. ?since=2025-01-01&until=2025-01-31",
        )
    rows = await gateway.ctx.store.usage(caller.id, since, until)
    entries = tuple(
        UsageEntry(
            day=r.day,
            tenant_id=r.tenant_id,
            key_id=r.key_id,
            model=r.model,
            kind=r.kind,
            audio_seconds=r.audio_seconds,
            sessions=r.sessions,
        )
        for r in rows
    )
    return UsageReport(
        tenant_id=caller.id,
        since=since,
        until=until,
        audio_seconds=round(sum(e.audio_seconds for e in entries), 3),
        entries=entries,
        quotas=await gateway.quotas.report(caller.id),
    )
