"""``/healthz`` (alive), ``/readyz`` (every dependency answers: 200, else 503 with a
reason for each; :mod:`voxwire.core.readiness`) and ``/metrics``: no key needed."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from voxwire.core.readiness import HEALTH_PATH, METRICS_PATH, READY_PATH, ReadinessReport
from voxwire.gateway.context import GatewayDep
from voxwire.sessions.languages import served_models
from voxwire_client.api import Health

router = APIRouter(tags=["health"])


@router.get(METRICS_PATH, response_class=Response)
async def metrics() -> Response:
    """This process's counters, Prometheus text format (no secrets, no session data)."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get(HEALTH_PATH, response_model=Health)
async def health(gateway: GatewayDep) -> Health:
    ctx = gateway.ctx
    settings = ctx.settings
    return Health(
        status="ok",
        version=version("voxwire"),
        mode=settings.mode,
        workers=ctx.workers,
        model=settings.engine.model,
        device=ctx.device,
        models=served_models(settings),
        routes=settings.pools.routes,
    )


@router.get(READY_PATH, response_model=ReadinessReport, responses={503: {}})
async def ready(gateway: GatewayDep) -> JSONResponse:
    """Whether each dependency answers now; 503 names those that do not."""
    report = await gateway.ctx.readiness.report()
    return JSONResponse(report.model_dump(), status_code=report.http_status)
