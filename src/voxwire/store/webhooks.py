"""The store's side of webhooks: deliveries and the API keys' signing secrets.

A delivery is one callback URL of one session, made when the upload is accepted
and kept until it is acknowledged (``delivered``), runs out of time
(``expired``) or is refused (``refused``: its host now resolves to an address
not allowed); until then it is ``pending``. A pending delivery is due once its
session is finished (completed or failed, not deleted) and its
``next_attempt_at`` has come. :meth:`WebhookStore.claim_deliveries` hands due
deliveries out under a lease (a random token, until ``leased_until``): only the
holder of the lease records the attempt's outcome, and a gateway that dies
mid-attempt leaves the delivery to be claimed again once the lease ran out. On
PostgreSQL the claim skips rows another gateway is claiming (``FOR UPDATE SKIP
LOCKED``).

Each API key has one webhook secret, made on first use, kept as it is (it signs,
so it must be read back), replaced by :meth:`WebhookStore.webhook_secret` with
``rotate``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    EXPIRED = "expired"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A callback to make once session ``sid`` is finished."""

    id: str
    sid: str
    key_id: str
    """The API key that uploaded: its secret signs the delivery."""
    url: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delivery as stored."""

    id: str
    sid: str
    key_id: str
    url: str
    state: DeliveryState
    attempts: int
    """Attempts begun (a claim counts as one)."""
    next_attempt_at: datetime
    created_at: datetime
    expires_at: datetime
    last_error: str | None = None
    delivered_at: datetime | None = None
    lease: str | None = None
    """The token of the claim holding it (None: not claimed)."""


class WebhookStore(Protocol):
    async def add_delivery(self, delivery: NewDelivery) -> None: ...

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int = 20
    ) -> list[Delivery]:
        """Pending deliveries due at ``now`` whose session is finished, leased to the
        caller until ``lease_until`` (each with its own new ``lease``) and counted as
        one more attempt; the oldest due first."""
        ...

    async def finish_delivery(
        self,
        delivery: Delivery,
        state: DeliveryState,
        *,
        at: datetime,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """Record the outcome of the attempt ``delivery`` was claimed for (state
        ``pending`` with ``next_attempt_at``: tried again then); False when its
        lease was lost (another gateway holds it now) and nothing was recorded."""
        ...

    async def expire_deliveries(self, now: datetime) -> int:
        """Pending deliveries past their ``expires_at`` (and not leased) become
        ``expired``: how many this call expired."""
        ...

    async def pending_deliveries(self) -> int:
        """How many deliveries are pending."""
        ...

    async def deliveries_of(self, sid: str) -> list[Delivery]:
        """Session ``sid``'s deliveries, oldest first."""
        ...

    async def drop_deliveries(self, sid: str) -> None:
        """Forget session ``sid``'s deliveries (it is deleted)."""
        ...

    async def webhook_secret(self, key_id: str, *, rotate: bool = False) -> str:
        """Key ``key_id``'s webhook secret, made now if it has none (``rotate``: a
        new one replaces it)."""
        ...


SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)


def new_secret() -> str:
    """A webhook signing secret: 256 random bits."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)
