"""A cap on request bodies: a JSON body of gigabytes must not be read into memory.

Pure ASGI middleware. Every request but the upload (which has its own limit,
``max_upload_mb``) may carry at most ``max_bytes``: a larger Content-Length is
answered 413 before anything is read; otherwise the body is read first (so a
body that turns out larger while it streams in, with no or a false
Content-Length, is answered 413 as well) and then handed to the app.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1024 * 1024


class BodyLimit:
    def __init__(
        self,
        app: App,
        max_bytes: int = MAX_BODY_BYTES,
        exempt: Callable[[Scope], bool] = lambda _scope: False,
    ) -> None:
        self._app = app
        self._max = max_bytes
        self._exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._exempt(scope):
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self._max:
            await self._refuse(send)
            return
        # Read the body first (at most max_bytes of it), then hand it on.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self._max:
                await self._refuse(send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "code": "payload_too_large",
                "message": f"the request body is larger than {self._max} bytes",
                "hint": "send less; audio goes to POST /v1/sessions or over MQTT",
                "sid": None,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
