"""``/healthz``, ``/readyz`` and ``/metrics`` of a process without the gateway.

A worker or a bridge serves them on ``host:metrics_port`` when that setting is
set (Kubernetes probes and Prometheus scrapes), from the moment it starts: a
worker still loading its engines is alive (``/healthz`` 200) and not ready
(``/readyz`` 503, ``engine: loading ...``). The gateway serves the same three
routes on its HTTP port.

The probe server runs on a thread and an event loop of its own, so that it
answers while the process's event loop is blocked: ``/healthz`` then says so
(503, :class:`voxwire.core.liveness.LoopWatch`), and ``/readyz``, whose checks
run on the process's loop, answers 503 once they have not come back in time.
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

from voxwire.core.liveness import Liveness
from voxwire.core.readiness import HEALTH_PATH, METRICS_PATH, READY_PATH, Readiness
from voxwire.platform.roles import HttpServer, listen

log = logging.getLogger(__name__)

PROBES = "probes"
"""The task that serves them: stopped by asking uvicorn to exit, not cancelled."""


def probe_app(
    readiness: Readiness, liveness: Liveness, role: str, loop: asyncio.AbstractEventLoop
) -> Starlette:
    """The three routes; ``loop``: the process's, where the readiness checks run."""

    async def healthz(_request: Request) -> Response:
        report = liveness.report()
        body = {"status": report.status, "role": role, "problems": report.problems}
        return JSONResponse(body, status_code=report.http_status)

    async def readyz(_request: Request) -> Response:
        asked = asyncio.run_coroutine_threadsafe(readiness.report(), loop)
        try:
            async with asyncio.timeout(readiness.timeout_s + 1.0):
                report = await asyncio.wrap_future(asked)
        except TimeoutError:
            asked.cancel()
            why = f"the event loop did not run the checks within {readiness.timeout_s + 1:.0f} s"
            body = {"status": "not ready", "checks": {"loop": {"ok": False, "reason": why}}}
            return JSONResponse(body, status_code=503)
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
    readiness: Readiness, liveness: Liveness, role: str, host: str, port: int
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Serve :func:`probe_app` on ``host:port`` from a thread of its own; returns
    once it listens. The task ends once the server was asked to exit."""
    sock = listen(host, port, "metrics_port")
    app = probe_app(readiness, liveness, role, asyncio.get_running_loop())
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=5,  # probes and scrapes answer at once
    )
    server = HttpServer(config)

    def serve() -> None:
        asyncio.run(server.serve(sockets=[sock]))

    task = asyncio.create_task(asyncio.to_thread(serve), name=PROBES)
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    log.info("health, readiness and metrics on http://%s:%d", host, sock.getsockname()[1])
    return server, task
