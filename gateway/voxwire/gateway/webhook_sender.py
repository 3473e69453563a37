"""The delivery loop: sends the webhooks of finished sessions, and retries them.

Every ``webhook_interval_s`` each gateway:

1. expires the pending deliveries older than ``webhook_ttl_h`` (counted
   ``expired``);
2. claims the deliveries due (their session finished, their next attempt come),
   under a lease (:meth:`~voxwire.store.webhooks.WebhookStore.claim_deliveries`:
   safe with several gateways, and across restarts: a delivery whose gateway died
   mid-attempt is claimed again once its lease ran out);
3. for each, builds the event from the store (:func:`~voxwire.sessions.webhooks.event_of`),
   signs it with its key's webhook secret, checks the URL's host again and
   connects to an address checked then (:mod:`voxwire.sessions.webhook_addresses`),
   and POSTs it with a timeout, following no redirect. A 2xx is ``delivered``; an
   address not allowed now is ``refused`` (for good); anything else is ``retried``
   :func:`~voxwire.sessions.webhooks.retry_delay` later, or ``expired`` when that
   is past the delivery's expiry.

A delivery is sent at least once: a gateway that dies after the receiver
answered and before the outcome is stored sends it again, with the same
``Voxwire-Delivery`` id. Nothing logged carries the secret, the body or the
URL's path and query (they may hold a receiver's token): the host and the
delivery id only.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version

import httpx

from voxwire.core.config import LimitSettings, Settings
from voxwire.core.errors import InvalidRequestError, VoxwireError
from voxwire.core.metrics import WEBHOOK_DELIVERIES, WEBHOOKS_PENDING
from voxwire.sessions.webhook_addresses import AllowList, CallbackRefusedError, check_callback
from voxwire.sessions.webhooks import event_of, retry_delay
from voxwire.store import Store
from voxwire.store.webhooks import Delivery, DeliveryState
from voxwire_client.webhooks import DELIVERY_HEADER, SESSION_HEADER, SIGNATURE_HEADER, sign

log = logging.getLogger(__name__)

BATCH = 20
"""Deliveries claimed per round, sent concurrently."""
LEASE_MARGIN_S = 30.0
"""A claim lasts an attempt's timeout and this much more."""


@dataclass(frozen=True, slots=True)
class RoundReport:
    delivered: int = 0
    retried: int = 0
    expired: int = 0
    refused: int = 0


class WebhookSender:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """``jitter``: a draw from 0 to 1 for each retry's wait."""
        self._store = store
        self._limits: LimitSettings = settings.limits
        self._allow = AllowList.of(settings.security.webhook_allow)
        self._jitter = jitter
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,  # no proxy from the environment: the address checked is the one used
            timeout=settings.limits.webhook_timeout_s,
            headers={"User-Agent": f"voxwire-webhooks/{version('voxwire')}"},
        )

    async def run(self) -> None:
        every = self._limits.webhook_interval_s
        try:
            while True:
                try:
                    report = await self.round()
                except VoxwireError as exc:
                    log.warning("webhook round failed: %s; trying again in %gs", exc, every)
                else:
                    if report != RoundReport():
                        log.info(
                            "webhooks: %d delivered, %d to retry, %d expired, %d refused",
                            report.delivered,
                            report.retried,
                            report.expired,
                            report.refused,
                        )
                await asyncio.sleep(every)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close its HTTP connections (:meth:`run` does when it stops)."""
        await self._client.aclose()

    async def round(self, now: datetime | None = None) -> RoundReport:
        """One round (``now``: the clock, for tests)."""
        now = now or datetime.now(UTC)
        expired = await self._store.expire_deliveries(now)
        WEBHOOK_DELIVERIES.labels(outcome="expired").inc(expired)
        lease = now + timedelta(seconds=self._limits.webhook_timeout_s + LEASE_MARGIN_S)
        claimed = await self._store.claim_deliveries(now, lease, BATCH)
        outcomes = await asyncio.gather(*(self._attempt(d) for d in claimed))
        WEBHOOKS_PENDING.set(await self._store.pending_deliveries())
        counts = {state: outcomes.count(state) for state in set(outcomes)}
        return RoundReport(
            delivered=counts.get(DeliveryState.DELIVERED, 0),
            retried=counts.get(DeliveryState.PENDING, 0),
            expired=expired + counts.get(DeliveryState.EXPIRED, 0),
            refused=counts.get(DeliveryState.REFUSED, 0),
        )

    async def _attempt(self, delivery: Delivery) -> DeliveryState | None:
        """Send ``delivery`` once; what it became (None: nothing recorded)."""
        event = await event_of(self._store, delivery.sid, delivery.id)
        if event is None:  # deleted while it was claimed
            await self._store.drop_deliveries(delivery.sid)
            return None
        body = event.model_dump_json().encode()
        secret = await self._store.webhook_secret(delivery.key_id)
        try:
            target = await check_callback(delivery.url, self._allow)
        except CallbackRefusedError as exc:
            return await self._finish(delivery, DeliveryState.REFUSED, exc.message)
        except InvalidRequestError as exc:  # the host does not resolve (now)
            return await self._retry(delivery, exc.message)
        headers = {
            "Host": target.host_header(),
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(secret, body),
            DELIVERY_HEADER: delivery.id,
            SESSION_HEADER: delivery.sid,
        }
        extensions = {"sni_hostname": target.host} if target.https else {}
        try:
            async with asyncio.timeout(self._limits.webhook_timeout_s):
                response = await self._client.post(
                    target.connect_url(), content=body, headers=headers, extensions=extensions
                )
        except (httpx.HTTPError, TimeoutError) as exc:
            return await self._retry(delivery, f"{type(exc).__name__}: {exc}"[:300])
        if response.is_success:
            return await self._finish(delivery, DeliveryState.DELIVERED, None)
        return await self._retry(delivery, f"HTTP {response.status_code} from {target.host}")

    async def _retry(self, delivery: Delivery, error: str) -> DeliveryState | None:
        now = datetime.now(UTC)
        limits = self._limits
        wait = retry_delay(
            delivery.attempts, limits.webhook_retry_s, limits.webhook_retry_max_s, self._jitter()
        )
        later = now + timedelta(seconds=wait)
        if later >= delivery.expires_at:
            return await self._finish(delivery, DeliveryState.EXPIRED, error)
        return await self._finish(delivery, DeliveryState.PENDING, error, later)

    async def _finish(
        self,
        delivery: Delivery,
        state: DeliveryState,
        error: str | None,
        later: datetime | None = None,
    ) -> DeliveryState | None:
        done = await self._store.finish_delivery(
            delivery, state, at=datetime.now(UTC), error=error, next_attempt_at=later
        )
        if not done:  # its lease ran out and another gateway holds it now
            return None
        outcome = "retried" if state is DeliveryState.PENDING else state.value
        WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()
        host = httpx.URL(delivery.url).host
        if state is DeliveryState.DELIVERED:
            log.info("webhook %s of %s delivered to %s", delivery.id, delivery.sid, host)
        elif later is not None:
            log.info(
                "webhook %s of %s to %s failed (attempt %d: %s); next at %s",
                delivery.id,
                delivery.sid,
                host,
                delivery.attempts,
                error,
                later.isoformat(timespec="seconds"),
            )
        else:
            log.warning(
                "webhook %s of %s to %s %s: %s", delivery.id, delivery.sid, host, state, error
            )
        return state
