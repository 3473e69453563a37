"""``/healthz`` (alive and making progress, else 503 with what is stuck:
:mod:`voxwire.core.liveness`), ``/readyz`` (every dependency answers: 200, else
503 with a reason for each; :mod:`voxwire.core.readiness`) and ``/metrics``: no
key needed."""

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


@router.get(HEALTH_PATH, response_model=Health, responses={503: {"model": Health}})
async def health(gateway: GatewayDep) -> Health | JSONResponse:
    """What the platform serves; 503 (``status`` stuck, with ``problems``) when a
    part of this process stopped making progress (:mod:`voxwire.core.liveness`)."""
    ctx = gateway.ctx
    settings = ctx.settings
    liveness = ctx.liveness.report()
    health = Health(
        status=liveness.status,
        problems=liveness.problems,
        version=version("voxwire"),
        mode=settings.mode,
        workers=ctx.workers,
        model=settings.engine.model,
        device=ctx.device,
        models=served_models(settings),
        routes=settings.pools.routes,
    )
    if liveness.alive:
        return health
    return JSONResponse(health.model_dump(mode="json"), status_code=liveness.http_status)


@router.get(READY_PATH, response_model=ReadinessReport, responses={503: {}})
async def ready(gateway: GatewayDep) -> JSONResponse:
    """Whether each dependency answers now; 503 names those that do not."""
    report = await gateway.ctx.readiness.report()
    return JSONResponse(report.model_dump(), status_code=report.http_status)
