"""Who is connected, what they want to do, and the two interfaces every broker
adapter (embedded, Mosquitto dynamic security, EMQX hooks) translates to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Action = Literal["publish", "subscribe", "receive"]
"""``subscribe`` checks a topic filter; ``receive`` a topic a message arrives on."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is connected: a user (API key owner) or a voxwire service."""

    name: str
    is_service: bool = False
    key_id: str | None = None
    """The id of the API key a user connected with."""
    device: bool = False
    """A device key: only the sessions ``key_id`` opened (:data:`~voxwire.access.keys.KeyRole`)."""
    sids: frozenset[str] | None = None
    """The only sessions a session token grants (None: every session of the tenant)."""
    expires_at: float | None = None
    """When the credentials expire (Unix seconds); nothing is allowed after."""


class Authenticator(Protocol):
    """Checks CONNECT credentials. Awaited on the broker's event loop: never block it."""

    async def authenticate(
        self, client_id: str, username: str | None, password: str | None
    ) -> Principal | None: ...


class Authorizer(Protocol):
    """Decides topic access. Awaited per message and subscriber on the broker's
    event loop: keep it fast (cache what it looks up), never block."""

    async def allow(self, principal: Principal, topic: str, action: Action) -> bool: ...
