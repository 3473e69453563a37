"""Quotas where sessions start: the store's limits and use, and
:func:`voxwire.access.quotas.decide` between them.

:meth:`QuotaGuard.admit` wraps the start of a session (an upload, a live
stream, a re-transcription): it reads the tenant's quotas (one query; none set,
nothing more is asked), and where there are some the current use of the tenant
and, with key quotas, of the key; a request over a quota raises
:class:`~voxwire.access.quotas.QuotaExceededError`. Checks and session
creations of one tenant take turns in one process, so concurrent requests to one
gateway cannot both take the last stream; several gateways may each admit one
at the same moment (the concurrency quotas are exact per process, and over
several by at most one per gateway).

:meth:`QuotaGuard.report` is what ``GET /v1/usage`` shows of the quotas: each
limit with its current use and when it resets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from voxwire.access.quotas import (
    QUOTA_NAMES,
    Ask,
    Limits,
    QuotaExceededError,
    QuotaName,
    Use,
    day_start,
    decide,
    resets_at,
)
from voxwire.core.metrics import QUOTA_REFUSALS
from voxwire.store import Store
from voxwire.store.base import QuotaSetting
from voxwire_client.usage import QuotaExceeded, QuotaStatus


def _now() -> datetime:
    return datetime.now(UTC)


def limits_of(settings: list[QuotaSetting], key_id: str | None) -> tuple[Limits, Limits]:
    """The tenant's limits and those of key ``key_id`` (empty: none set)."""
    tenant: dict[QuotaName, int] = {}
    key: dict[QuotaName, int] = {}
    for setting in settings:
        if setting.key_id is None:
            tenant[setting.name] = setting.value
        elif setting.key_id == key_id:
            key[setting.name] = setting.value
    return Limits(tenant), Limits(key)


class QuotaGuard:
    def __init__(self, store: Store, clock: Callable[[], datetime] = _now) -> None:
        self._store = store
        self._clock = clock
        self._turns: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def admit(self, tenant_id: str, key_id: str | None, ask: Ask) -> AsyncIterator[None]:
        """Check ``ask`` against the quotas, then run the block that creates the
        session, in turn with the other admissions of the tenant in this process."""
        turn = self._turns.setdefault(tenant_id, asyncio.Lock())
        async with turn:
            await self.check(tenant_id, key_id, ask)
            yield

    async def check(self, tenant_id: str, key_id: str | None, ask: Ask) -> None:
        """Raise QuotaExceededError when ``ask`` breaks a quota of the tenant or key."""
        settings = await self._store.quotas(tenant_id)
        if not settings:
            return
        limits, key_limits = limits_of(settings, key_id)
        if not limits and not key_limits:
            return
        now = self._clock()
        today = day_start(now)
        use = await self._store.quota_use(tenant_id, None, today) if limits else Use()
        key_use = await self._store.quota_use(tenant_id, key_id, today) if key_limits else None
        refusal = decide(limits, use, ask, now, key_limits=key_limits, key_use=key_use)
        if refusal is not None:
            QUOTA_REFUSALS.labels(quota=refusal.quota).inc()
            raise QuotaExceededError(refusal)

    async def report(self, tenant_id: str) -> tuple[QuotaStatus, ...]:
        """Every quota set for the tenant and its keys, with the current use."""
        settings = await self._store.quotas(tenant_id)
        now = self._clock()
        today = day_start(now)
        uses: dict[str | None, Use] = {}
        out = []
        order = {name: i for i, name in enumerate(QUOTA_NAMES)}
        for setting in sorted(settings, key=lambda s: (s.key_id or "", order[s.name])):
            if setting.key_id not in uses:
                uses[setting.key_id] = await self._store.quota_use(tenant_id, setting.key_id, today)
            per_request = setting.name in ("upload_bytes", "upload_seconds")
            out.append(
                QuotaStatus(
                    quota=setting.name,
                    scope="key" if setting.key_id else "tenant",
                    key_id=setting.key_id,
                    limit=setting.value,
                    used=None if per_request else uses[setting.key_id].of(setting.name),
                    resets_at=resets_at(setting.name, now),
                )
            )
        return tuple(out)


def quota_detail(exc: Exception) -> QuotaExceeded | None:
    """What an error answer says of the quota ``exc`` exceeded (None: not a quota's)."""
    if not isinstance(exc, QuotaExceededError):
        return None
    refusal = exc.refusal
    return QuotaExceeded(
        quota=refusal.quota,
        scope=refusal.scope,
        limit=refusal.limit,
        used=refusal.used,
        resets_at=refusal.resets_at,
    )
