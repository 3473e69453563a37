"""``/healthz``, ``/readyz`` and ``/metrics`` of a process without the gateway.

A worker or a bridge serves them on ``host:metrics_port`` when that setting is
set (Kubernetes probes and Prometheus scrapes), from the moment it starts: a
worker still loading its engines is alive (``/healthz`` 200) and not ready
(``/readyz`` 503, ``engine: loading ...``). The gateway serves the same three
routes on its HTTP port.
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from voxwire.core.readiness import HEALTH_PATH, METRICS_PATH, READY_PATH, Readiness
from voxwire.platform.roles import HttpServer, listen

log = logging.getLogger(__name__)

PROBES = "probes"
"""The task that serves them: stopped by asking uvicorn to exit, not cancelled."""


def probe_app(readiness: Readiness, role: str) -> Starlette:
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok", "role": role})

    async def readyz(_request: Request) -> Response:
        report = await readiness.report()
        return JSONResponse(report.model_dump(), status_code=report.http_status)

    async def metrics(_request: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            Route(HEALTH_PATH, healthz),
            Route(READY_PATH, readyz),
            Route(METRICS_PATH, metrics),
        ]
    )


async def serve_probes(
    readiness: Readiness, role: str, host: str, port: int
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Serve :func:`probe_app` on ``host:port``; returns once it listens."""
    sock = listen(host, port, "metrics_port")
    config = uvicorn.Config(
        probe_app(readiness, role),
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=5,  # probes and scrapes answer at once
    )
    server = HttpServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=PROBES)
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    log.info("health, readiness and metrics on http://%s:%d", host, sock.getsockname()[1])
    return server, task
