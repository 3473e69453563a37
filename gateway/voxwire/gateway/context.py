"""What the gateway's routes run on: the adapters a process hands it
(:class:`GatewayContext`) and the services built on them once per app
(:class:`Gateway`, kept on ``app.state``), which a route takes as a
:data:`GatewayDep` parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from voxwire.access.control import AccessControl, NoAccessSync
from voxwire.access.tokens import TokenIssuer, issuer_for
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.liveness import Liveness
from voxwire.core.ratelimit import RateLimits
from voxwire.core.readiness import Readiness
from voxwire.search import SearchIndex
from voxwire.sessions.deletion import CheckpointStore, RetainedPublisher, SessionEraser
from voxwire.sessions.pools import PoolCheck
from voxwire.sessions.quotas import QuotaGuard
from voxwire.sessions.retranscribe import RetranscribeService
from voxwire.sessions.streams import StreamService
from voxwire.sessions.uploads import UploadService
from voxwire.store import Store


@dataclass(frozen=True, slots=True)
class GatewayContext:
    settings: Settings
    store: Store
    bus: Bus
    blobs: BlobStore
    workers: int
    search: SearchIndex
    access: AccessControl = field(default_factory=NoAccessSync)
    tokens: TokenIssuer | None = None
    """Signs browser session tokens; None: the settings' issuer."""
    device: str | None = None
    """Where this process's engines run (``cuda:0 (NVIDIA H200)``, ``cpu``); None: elsewhere."""
    readiness: Readiness = field(default_factory=Readiness)
    """What ``/readyz`` asks: the dependencies of this process's roles."""
    liveness: Liveness = field(default_factory=Liveness)
    """What ``/healthz`` watches: whether this process's roles still make progress."""
    pools: PoolCheck | None = None
    """Asks whether a worker runs a session's model before it is accepted (None: not asked)."""
    retained: RetainedPublisher | None = None
    """Clears a deleted session's retained messages on the broker (None: no broker)."""
    checkpoints: CheckpointStore | None = None
    """Where live streams keep their checkpoints (None: inside the stream worker)."""


@dataclass(frozen=True, slots=True)
class Gateway:
    """One app's context and the services its routes share."""

    ctx: GatewayContext
    uploads: UploadService
    streams: StreamService
    retranscribe: RetranscribeService
    limits: RateLimits
    """Requests per tenant."""
    tokens: TokenIssuer
    """Signs and checks session tokens."""
    eraser: SessionEraser
    """Deletes sessions (a request, the sweeper)."""
    quotas: QuotaGuard
    """The tenants' quotas, checked where sessions start (one guard for all three)."""

    @classmethod
    def of(cls, ctx: GatewayContext) -> Gateway:
        settings = ctx.settings
        quotas = QuotaGuard(ctx.store)
        return cls(
            ctx,
            UploadService(settings, ctx.store, ctx.bus, ctx.blobs, ctx.access, ctx.pools, quotas),
            StreamService(ctx.store, ctx.bus, ctx.access, settings, ctx.pools, quotas),
            RetranscribeService(settings, ctx.store, ctx.bus, ctx.blobs, ctx.pools, quotas),
            RateLimits(settings.limits.rate_limit_per_s, settings.limits.rate_limit_burst),
            ctx.tokens
            or issuer_for(settings.security.token_secret.get_secret_value(), settings.data_dir),
            SessionEraser(
                ctx.store,
                ctx.blobs,
                ctx.search,
                ctx.bus,
                retained=ctx.retained,
                checkpoints=ctx.checkpoints,
                settle_s=settings.limits.sweep_interval_s,
            ),
            quotas,
        )


def gateway(request: Request) -> Gateway:
    """The :class:`Gateway` of the app serving ``request``."""
    found: Gateway = request.app.state.gateway
    return found


GatewayDep = Annotated[Gateway, Depends(gateway)]
