"""Request counts and latency of the gateway, by route template.

Pure ASGI middleware: each HTTP request is counted once its response has
started (by route template, method and status code) and timed to its last
byte. The route is the template the request matched (``/v1/sessions/{sid}``),
never the path itself, so no session id becomes a label; a request no API
route matched (the web app's files, unknown paths) counts under ``other``.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxwire.core.metrics import HTTP_REQUESTS, HTTP_SECONDS

UNMATCHED = "other"


def route_of(scope: Scope) -> str:
    """The template of the route that served ``scope`` (set by the router)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, timed_send)
        finally:
            route = route_of(scope)
            HTTP_REQUESTS.labels(route=route, method=scope["method"], status=str(status)).inc()
            HTTP_SECONDS.labels(route=route).observe(time.perf_counter() - started)
