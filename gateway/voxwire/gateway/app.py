"""The HTTP gateway (FastAPI): upload, live streams, session status, transcripts,
history, search, session tokens, OpenAI's audio API, Deepgram's listening API,
health, the EMQX hooks and the web app (``/app/``).

:func:`create_app` composes it: the routers of :mod:`voxwire.gateway.routes`, one per
resource, on the services of a :class:`~voxwire.gateway.context.Gateway` kept on
``app.state``; who may call what is :mod:`voxwire.gateway.auth`, and errors are JSON
bodies of :class:`~voxwire_client.api.ErrorBody` (:mod:`voxwire.gateway.errors`).
"""

from importlib.metadata import version

from fastapi import FastAPI

from voxwire.gateway.body_limit import BodyLimit
from voxwire.gateway.context import Gateway, GatewayContext
from voxwire.gateway.emqx import emqx_hooks
from voxwire.gateway.errors import add_error_handlers
from voxwire.gateway.request_metrics import RequestMetrics
from voxwire.gateway.routes import (
    deepgram,
    deepgram_live,
    health,
    openai,
    search,
    sessions,
    streams,
    telephony,
    tokens,
    uploads,
    usage,
)
from voxwire.gateway.routes.deepgram import is_deepgram_upload
from voxwire.gateway.routes.openai import is_openai_upload
from voxwire.gateway.routes.uploads import is_upload
from voxwire.gateway.web import mount_web_app

__all__ = ["GatewayContext", "create_app"]


def create_app(ctx: GatewayContext) -> FastAPI:
    app = FastAPI(
        title="voxwire gateway",
        version=version("voxwire"),
        description="Upload audio, follow sessions, fetch transcripts. Results are delivered "
        "over MQTT on transcription/<sid>/result|progress|match.",
    )
    gateway = Gateway.of(ctx)
    app.state.gateway = gateway
    add_error_handlers(app)
    routers = (health, uploads, streams, telephony, sessions, search, tokens, openai, usage)
    for module in routers:
        app.include_router(module.router)
    for deepgram_api in (deepgram, deepgram_live):
        app.include_router(deepgram_api.router)
    security = ctx.settings.security
    if security.hook_secret.get_secret_value():
        app.include_router(
            emqx_hooks(
                ctx.store, gateway.tokens, security.hook_secret, ctx.settings.servers.mqtt_password
            )
        )
    mount_web_app(app)
    app.add_middleware(
        BodyLimit,
        exempt=lambda scope: (
            is_upload(scope) or is_openai_upload(scope) or is_deepgram_upload(scope)
        ),
    )
    app.add_middleware(RequestMetrics)
    return app
