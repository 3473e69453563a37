"""Keeping a broker's own access rules in step with voxwire's keys, sessions and tokens.

Some brokers enforce access themselves from rules voxwire gives them
(Mosquitto's dynamic security: :mod:`voxwire.broker.dynsec`); others ask
voxwire on every decision (the embedded broker, EMQX over HTTP), so nothing
needs keeping in step and :class:`NoAccessSync` stands in.
"""

from __future__ import annotations

from typing import Protocol

from voxwire.access.tokens import SessionToken


class AccessControl(Protocol):
    """Broker-side access rules that voxwire keeps in sync."""

    async def add_key(
        self, tenant_id: str, key_id: str, plaintext: str, *, device: bool = False
    ) -> None:
        """Let the key connect: a tenant key to its tenant's sessions, a device key
        (``device``) to the sessions granted to it alone."""
        ...

    async def remove_key(self, key_id: str) -> None: ...
    async def grant_session(self, tenant_id: str, sid: str, device_key: str | None = None) -> None:
        """Open session ``sid`` to its tenant's keys, and to ``device_key``, the
        device key that opened it (if one did)."""
        ...

    async def add_token(self, grant: SessionToken) -> None: ...


class NoAccessSync:
    """For brokers that ask voxwire (the embedded broker, EMQX over HTTP)."""

    async def add_key(
        self, tenant_id: str, key_id: str, plaintext: str, *, device: bool = False
    ) -> None:
        return None

    async def remove_key(self, key_id: str) -> None:
        return None

    async def grant_session(self, tenant_id: str, sid: str, device_key: str | None = None) -> None:
        return None

    async def add_token(self, grant: SessionToken) -> None:
        return None
