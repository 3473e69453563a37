"""The embedded broker's connection gate and the amqtt plugins it hands principals to.

:meth:`AccessGate.admit` reads a connection's CONNECT itself
(:mod:`voxwire.broker.connect`), before amqtt sees the connection:

- MQTT 5 CONNECTs are refused at once with CONNACK 0x84 (unsupported protocol
  version), so clients fall back to 3.1.1. amqtt alone misreads the MQTT 5
  properties and waits for bytes that never come, until the client gives up.
- credentials are checked (awaiting the :class:`~voxwire.access.principal.Authenticator`)
  before amqtt sees the connection. amqtt alone takes over (disconnects) an
  existing session with the same client id, or wipes it for a clean session,
  before it looks at the authentication result.
- a client id held by a session of another principal is refused (0x02), so one
  user cannot take over another user's session and its subscriptions.

The admitted principal waits in :attr:`AccessGate.admitted` (by peer address)
until amqtt's auth plugin (:class:`AuthPlugin`) stores it on the session; the
topic plugin (:class:`TopicPlugin`) then asks the
:class:`~voxwire.access.principal.Authorizer` about every publish, subscribe
and delivery. :class:`ReplayReader` hands amqtt the bytes the gate read, ends
a connection that sends a packet over :data:`MAX_PACKET_BYTES`, and reads a
user's connection more slowly past :data:`CLIENT_BYTES_PER_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.contexts import Action as AmqttAction
from amqtt.errors import NoDataError
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from voxwire.access.principal import Authenticator, Authorizer, Principal
from voxwire.access.rules import may_take_client_id
from voxwire.broker.connect import (
    BAD_CREDENTIALS,
    CONNACK_V5_UNSUPPORTED,
    IDENTIFIER_REJECTED,
    NOT_AUTHORIZED,
    SERVER_UNAVAILABLE,
    UNACCEPTABLE_PROTOCOL,
    Refused,
    connack,
    parse_connect,
    read_first_packet,
)
from voxwire.core.metrics import MQTT_THROTTLED
from voxwire.core.ratelimit import RateLimits

if TYPE_CHECKING:
    from amqtt.session import Session

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "voxwire.principal"
"""Where a session's principal is kept in amqtt's ``session.attributes``."""
MAX_PACKET_BYTES = 1024 * 1024 + 1024
CLIENT_BYTES_PER_S = 256 * 1024
"""What one user's connection may send, sustained (live audio is 32 KB/s);
beyond it the broker reads that connection more slowly (nothing is dropped:
TCP holds the client back), as EMQX's ``bytes_rate`` does. Services are not
limited."""
CLIENT_BURST_BYTES = 4 * MAX_PACKET_BYTES
"""Larger packets end the connection (as Mosquitto's ``max_packet_size``): a
chunk of audio is well under 1 MB."""

Peer = tuple[str, int]
HolderLookup = Callable[[str], Principal | None]
"""Client id -> the principal of the session that holds it, if any."""


def principal_of(session: Session | None) -> Principal | None:
    principal = session.attributes.get(PRINCIPAL_KEY) if session is not None else None
    return principal if isinstance(principal, Principal) else None


class AccessGate:
    """The access rules of one broker, shared by its connection gate and plugins."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.admitted: dict[Peer, Principal] = {}
        self.throttled = 0  # times a user's connection was read more slowly

    async def admit(self, reader: ReaderAdapter, peer: Peer, holder_of: HolderLookup) -> bytes:
        """Read and check the CONNECT; the bytes read, for amqtt. Raises :class:`Refused`."""
        head, body = await read_first_packet(reader)
        connect = parse_connect(body)
        if connect.level == 5:
            raise Refused("MQTT 5 is not supported", CONNACK_V5_UNSUPPORTED)
        if connect.level != 4:
            raise Refused(f"protocol level {connect.level}", connack(UNACCEPTABLE_PROTOCOL))
        try:
            principal = await self.authenticator.authenticate(
                connect.client_id, connect.username, connect.password
            )
        except Exception as exc:
            log.exception("authenticator failed for user %r", connect.username)
            raise Refused("authenticator failed", connack(SERVER_UNAVAILABLE)) from exc
        if principal is None:
            code = NOT_AUTHORIZED if connect.username is None else BAD_CREDENTIALS
            raise Refused(f"credentials refused for user {connect.username!r}", connack(code))
        if not may_take_client_id(principal, holder_of(connect.client_id)):
            reason = f"client id {connect.client_id!r} belongs to another principal"
            raise Refused(reason, connack(IDENTIFIER_REJECTED))
        self.admitted[peer] = principal
        return head + body

    def limits_for(self, peer: Peer) -> RateLimits | None:
        """How fast the admitted connection from ``peer`` may send (None: services, unlimited)."""
        principal = self.admitted.get(peer)
        if principal is not None and principal.is_service:
            return None
        return RateLimits(CLIENT_BYTES_PER_S, CLIENT_BURST_BYTES)

    async def allow(
        self, session: Session | None, topic: str | None, action: AmqttAction | None
    ) -> bool:
        principal = principal_of(session)
        if principal is None or topic is None or action is None:
            return False
        try:
            return bool(await self.authorizer.allow(principal, topic, action.value))
        except Exception:
            log.exception(
                "authorizer failed: %s %s by %s denied", action.value, topic, principal.name
            )
            return False


class ReplayReader(ReaderAdapter):  # type: ignore[misc]  # amqtt is untyped
    """Serves the bytes the gate already read, then the connection's own; a
    read of more than ``MAX_PACKET_BYTES`` (a packet's body: amqtt reads it in
    one call) ends the connection instead, and every later read finds no data
    (amqtt would otherwise parse the rest of the oversized packet, already
    received, as a stream of reserved packets)."""

    def __init__(
        self,
        first: bytes,
        inner: ReaderAdapter,
        writer: WriterAdapter,
        peer: Peer,
        gate: AccessGate,
        limits: RateLimits | None,
    ) -> None:
        self._buffer = first
        self._inner = inner
        self._writer = writer
        self._peer = peer
        self._gate = gate
        self._limits = limits
        self._ended = False

    async def read(self, n: int = -1) -> bytes:
        if self._ended:
            raise NoDataError("connection ended")
        if n > MAX_PACKET_BYTES:
            self._ended = True
            log.warning(
                "closing MQTT connection from %s:%s: a packet of %d bytes (limit %d)",
                *self._peer,
                n,
                MAX_PACKET_BYTES,
            )
            await close_connection(self._writer)
            raise NoDataError("packet too large")
        data = await self._read(n)
        if self._limits is not None and data:
            cost = min(len(data), self._limits.burst)
            while wait := self._limits.take("connection", cost):
                self._gate.throttled += 1
                MQTT_THROTTLED.inc()
                await asyncio.sleep(wait)
        return data

    async def _read(self, n: int) -> bytes:
        if not self._buffer:
            return bytes(await self._inner.read(n))
        if 0 <= n <= len(self._buffer):
            data, self._buffer = self._buffer[:n], self._buffer[n:]
            return data
        data, self._buffer = self._buffer, b""
        return data + bytes(await self._inner.read(-1 if n < 0 else n - len(data)))

    def feed_eof(self) -> None:
        self._inner.feed_eof()


async def close_connection(writer: WriterAdapter, connack: bytes = b"") -> None:
    """Send ``connack`` (when not empty) and close, ignoring a connection already gone."""
    with contextlib.suppress(OSError, ConnectionError, RuntimeError):
        if connack:
            writer.write(connack)
            await writer.drain()
        await writer.close()


class AuthPlugin(BaseAuthPlugin):  # type: ignore[misc]
    """Accepts the connections the gate admitted, and remembers their principal."""

    @dataclass
    class Config:
        gate: Any = None

    async def authenticate(self, *, session: Session) -> bool:
        gate: AccessGate = self.context.config.gate
        peer = (session.remote_address or "", session.remote_port or 0)
        principal = gate.admitted.pop(peer, None)
        if principal is None:
            return False
        session.attributes[PRINCIPAL_KEY] = principal
        return True


class TopicPlugin(BaseTopicPlugin):  # type: ignore[misc]
    """Asks the authorizer about every publish, subscribe and delivery."""

    @dataclass
    class Config:
        gate: Any = None

    async def topic_filtering(
        self,
        *,
        session: Session | None = None,
        topic: str | None = None,
        action: AmqttAction | None = None,
    ) -> bool:
        gate: AccessGate = self.context.config.gate
        return await gate.allow(session, topic, action)
