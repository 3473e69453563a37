"""The embedded MQTT broker: amqtt 0.12.1 in-process, with voxwire's access rules.

One-machine mode runs this broker inside the voxwire process; the distributed
mode uses EMQX or Mosquitto instead. Both see the same two small interfaces:

- an :class:`~voxwire.access.principal.Authenticator` turns CONNECT credentials
  into a :class:`~voxwire.access.principal.Principal` (or refuses them), and
- an :class:`~voxwire.access.principal.Authorizer` decides per topic whether a principal may
  ``publish``, ``subscribe`` (the topic is then a filter) or ``receive``.

Usage::

    async with EmbeddedBroker(authenticator, authorizer, tcp_port=1883) as broker:
        ...  # clients connect to broker.tcp_url or broker.ws_url

Everything amqtt-specific stays in this module. On top of amqtt it adds a
connection gate that reads the first packet itself, bounded in size and time:

- MQTT 5 CONNECTs are refused at once with CONNACK 0x84 (unsupported protocol
  version), so clients fall back to 3.1.1. amqtt alone misreads the MQTT 5
  properties and waits for bytes that never come, until the client gives up.
- credentials are checked before amqtt sees the connection. amqtt alone takes
  over (disconnects) an existing session with the same client id, or wipes it
  for a clean session, before it looks at the authentication result.
- a client id held by a session of another principal is refused (0x02), so one
  user cannot take over another user's session and its subscriptions.

It also replaces amqtt's retained-message delivery: amqtt sends every client,
on each connect, the retained messages matching *anyone's* subscriptions,
without asking the authorizer. Here retained messages go only to the client
that subscribes, and only where the authorizer allows ``receive``.

amqtt keeps retained messages and sessions in memory: stopping the broker
loses them. Any WebSocket path is accepted (mqtt.js uses ``/mqtt``). Logs go to
``voxwire.broker.embedded``; amqtt's own loggers are set to WARNING on start
(see :data:`NOISY_LOGGERS`), and a failed WebSocket handshake (an HTTP probe)
is logged at DEBUG instead of as an error with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import amqtt
from amqtt.adapters import (
    ReaderAdapter,
    StreamReaderAdapter,
    StreamWriterAdapter,
    WebSocketsReader,
    WebSocketsWriter,
    WriterAdapter,
)
from amqtt.broker import Broker
from amqtt.codecs_amqtt import read_or_raise
from amqtt.contexts import Action as AmqttAction
from amqtt.contexts import ListenerType
from amqtt.errors import NoDataError
from amqtt.events import BrokerEvents
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from websockets import Subprotocol
from websockets.asyncio.server import Server as WebSocketServer
from websockets.asyncio.server import serve as websockets_serve

from voxwire.access.principal import Authenticator, Authorizer, Principal
from voxwire.core.errors import MqttError
from voxwire.core.metrics import MQTT_THROTTLED
from voxwire.core.ratelimit import RateLimits

if TYPE_CHECKING:
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
    from amqtt.session import Session
    from websockets.asyncio.server import ServerConnection

log = logging.getLogger(__name__)

#: Library loggers set to WARNING when a broker starts, unless already configured.
NOISY_LOGGERS = ("amqtt", "transitions", f"{__name__}.websockets")

_AMQTT_VERSION = "0.12.1"
_PRINCIPAL_KEY = "voxwire.principal"
_MAX_CONNECT_BYTES = 64 * 1024
MAX_PACKET_BYTES = 1024 * 1024 + 1024
CLIENT_BYTES_PER_S = 256 * 1024
"""What one user's connection may send, sustained (live audio is 32 KB/s);
beyond it the broker reads that connection more slowly (nothing is dropped:
TCP holds the client back), as EMQX's ``bytes_rate`` does. Services are not
limited."""
CLIENT_BURST_BYTES = 4 * MAX_PACKET_BYTES
"""Larger packets end the connection (as Mosquitto's ``max_packet_size``): a
chunk of audio is well under 1 MB."""
_SUBACK_FAILURE = 0x80

# CONNACK return codes (MQTT 3.1.1 section 3.2.2.3) and the MQTT 5 refusal.
_IDENTIFIER_REJECTED = 0x02
_SERVER_UNAVAILABLE = 0x03
_BAD_CREDENTIALS = 0x04
_NOT_AUTHORIZED = 0x05
_CONNACK_V5_UNSUPPORTED = bytes([0x20, 0x03, 0x00, 0x84, 0x00])


@dataclass(frozen=True, slots=True)
class ConnectFields:
    """The fields of an MQTT 3.1.1 CONNECT the gate needs."""

    level: int
    client_id: str
    username: str | None
    password: str | None


class _Refused(ValueError):
    """The gate refuses a connection; ``connack`` is sent first when not empty."""

    def __init__(self, reason: str, connack: bytes = b"") -> None:
        super().__init__(reason)
        self.connack = connack


def _connack(code: int) -> bytes:
    return bytes([0x20, 0x02, 0x00, code])


def parse_connect(body: bytes) -> ConnectFields:
    """Parse a CONNECT body (after the fixed header); stops at the level unless it is 4.

    Raises ValueError on a malformed packet.
    """

    def text(pos: int) -> tuple[str, int]:
        if pos + 2 > len(body):
            raise _Refused("truncated CONNECT")
        (size,) = struct.unpack_from("!H", body, pos)
        end = pos + 2 + size
        if end > len(body):
            raise _Refused("truncated CONNECT")
        try:
            return body[pos + 2 : end].decode("utf-8"), end
        except UnicodeDecodeError as exc:
            raise _Refused("CONNECT string is not UTF-8") from exc

    name, pos = text(0)
    if name not in ("MQTT", "MQIsdp") or pos + 4 > len(body):
        raise _Refused(f"not an MQTT CONNECT (protocol name {name!r})")
    level, flags = body[pos], body[pos + 1]
    if level != 4:
        return ConnectFields(level, "", None, None)
    pos += 4  # level, flags, keep-alive
    client_id, pos = text(pos)
    if flags & 0x04:  # will flag: topic and message
        _, pos = text(pos)
        _, pos = text(pos)
    username = password = None
    if flags & 0x80:
        username, pos = text(pos)
    if flags & 0x40:
        password, pos = text(pos)
    return ConnectFields(level, client_id, username, password)


async def _read_first_packet(reader: ReaderAdapter) -> tuple[bytes, bytes]:
    """Read the fixed header and body of the first packet, which must be a CONNECT."""
    head = bytearray(await read_or_raise(reader, 1))
    if head[0] != 0x10:
        raise _Refused(f"first packet is not CONNECT (0x{head[0]:02x})")
    length, multiplier = 0, 1
    for _ in range(4):
        byte = (await read_or_raise(reader, 1))[0]
        head.append(byte)
        length += (byte & 0x7F) * multiplier
        if not byte & 0x80:
            break
        multiplier *= 128
    if length > _MAX_CONNECT_BYTES:
        raise _Refused(f"CONNECT of {length} bytes is too large")
    return bytes(head), await read_or_raise(reader, length)


class _ReplayReader(ReaderAdapter):  # type: ignore[misc]  # amqtt is untyped
    """Serves the bytes the gate already read, then the connection's own; a
    read of more than ``MAX_PACKET_BYTES`` (a packet's body: amqtt reads it in
    one call) ends the connection instead."""

    def __init__(
        self,
        first: bytes,
        inner: ReaderAdapter,
        writer: WriterAdapter,
        peer: tuple[str, int],
        gate: _Gate,
        limits: RateLimits | None,
    ) -> None:
        self._buffer = first
        self._inner = inner
        self._writer = writer
        self._peer = peer
        self._gate = gate
        self._limits = limits

    async def read(self, n: int = -1) -> bytes:
        if n > MAX_PACKET_BYTES:
            log.warning(
                "closing MQTT connection from %s:%s: a packet of %d bytes (limit %d)",
                *self._peer,
                n,
                MAX_PACKET_BYTES,
            )
            await _close(self._writer)
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


class _WebSocketLog(logging.LoggerAdapter[logging.Logger]):
    """The WebSocket listener's log: a failed handshake (HTTP probe, scanner) is not an error."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg == "opening handshake failed":
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


def _principal_of(session: Session | None) -> Principal | None:
    principal = session.attributes.get(_PRINCIPAL_KEY) if session is not None else None
    return principal if isinstance(principal, Principal) else None


class _Gate:
    """The access rules of one broker, shared by its connection gate and plugins."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.admitted: dict[tuple[str, int], Principal] = {}
        self.throttled = 0  # times a user's connection was read more slowly

    async def allow(
        self, session: Session | None, topic: str | None, action: AmqttAction | None
    ) -> bool:
        principal = _principal_of(session)
        if principal is None or topic is None or action is None:
            return False
        try:
            return bool(await self.authorizer.allow(principal, topic, action.value))
        except Exception:
            log.exception(
                "authorizer failed: %s %s by %s denied", action.value, topic, principal.name
            )
            return False


class _AuthPlugin(BaseAuthPlugin):  # type: ignore[misc]
    """Accepts the connections the gate admitted, and remembers their principal."""

    @dataclass
    class Config:
        gate: Any = None

    async def authenticate(self, *, session: Session) -> bool:
        gate: _Gate = self.context.config.gate
        peer = (session.remote_address or "", session.remote_port or 0)
        principal = gate.admitted.pop(peer, None)
        if principal is None:
            return False
        session.attributes[_PRINCIPAL_KEY] = principal
        return True


class _TopicPlugin(BaseTopicPlugin):  # type: ignore[misc]
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
        gate: _Gate = self.context.config.gate
        return await gate.allow(session, topic, action)


class _SubscriptionTable(dict[str, list[tuple["Session", int]]]):
    """amqtt's subscription table, iterated over snapshots.

    amqtt awaits inside its loops over subscriptions (authorization, queueing for
    offline sessions); a client subscribing meanwhile changed the dict under the
    loop ("dictionary changed size during iteration"), which silently dropped the
    message being broadcast for every remaining subscriber.
    """

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))

    def items(self) -> list[tuple[str, list[tuple[Session, int]]]]:  # type: ignore[override]
        return [(topic, list(subs)) for topic, subs in super().items()]


class _Broker(Broker):  # type: ignore[misc]
    """amqtt's broker behind the gate, with retained delivery that respects the authorizer."""

    def __init__(self, config: dict[str, Any], gate: _Gate, connect_timeout_s: float) -> None:
        super().__init__(config)
        self._subscriptions = _SubscriptionTable()
        self._gate = gate
        self._connect_timeout_s = connect_timeout_s

    async def _create_server_instance(
        self,
        listener_name: str,
        listener_type: ListenerType,
        address: str | None,
        port: int,
        ssl_context: ssl.SSLContext | None,
    ) -> asyncio.Server | WebSocketServer:
        if listener_type != ListenerType.WS:
            server: asyncio.Server = await super()._create_server_instance(
                listener_name, listener_type, address, port, ssl_context
            )
            return server
        # as amqtt does it, plus a logger of our own (amqtt logs through "websockets.server")
        return await websockets_serve(
            partial(self.ws_connected, listener_name=listener_name),
            address,
            port,
            ssl=ssl_context,
            subprotocols=[Subprotocol("mqtt")],
            logger=_WebSocketLog(logging.getLogger(f"{__name__}.websockets")),
        )

    async def stream_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
    ) -> None:
        await self._guarded(listener_name, StreamReaderAdapter(reader), StreamWriterAdapter(writer))

    async def ws_connected(self, websocket: ServerConnection, listener_name: str) -> None:
        await self._guarded(listener_name, WebSocketsReader(websocket), WebSocketsWriter(websocket))

    async def _guarded(
        self, listener_name: str, reader: ReaderAdapter, writer: WriterAdapter
    ) -> None:
        peer = writer.get_peer_info()
        if peer is None:
            await _close(writer)
            return
        try:
            first = await asyncio.wait_for(self._admit(reader, peer), self._connect_timeout_s)
        except _Refused as exc:
            log.info("refused MQTT connection from %s:%s: %s", *peer, exc)
            await _close(writer, exc.connack)
            return
        except (NoDataError, TimeoutError, OSError) as exc:  # probes, scanners, slow clients
            log.debug("no MQTT CONNECT from %s:%s: %r", *peer, exc)
            await _close(writer)
            return
        principal = self._gate.admitted.get(peer)
        limits = None
        if principal is None or not principal.is_service:
            limits = RateLimits(CLIENT_BYTES_PER_S, CLIENT_BURST_BYTES)
        try:
            await self.external_connected(
                _ReplayReader(first, reader, writer, peer, self._gate, limits),
                writer,
                listener_name,
            )
        except (OSError, NoDataError) as exc:
            log.debug("MQTT connection from %s:%s ended: %r", *peer, exc)
        finally:
            self._gate.admitted.pop(peer, None)

    async def _admit(self, reader: ReaderAdapter, peer: tuple[str, int]) -> bytes:
        head, body = await _read_first_packet(reader)
        connect = parse_connect(body)
        if connect.level == 5:
            raise _Refused("MQTT 5 is not supported", _CONNACK_V5_UNSUPPORTED)
        if connect.level != 4:
            raise _Refused(f"protocol level {connect.level}", _connack(0x01))
        try:
            principal = await self._gate.authenticator.authenticate(
                connect.client_id, connect.username, connect.password
            )
        except Exception as exc:
            log.exception("authenticator failed for user %r", connect.username)
            raise _Refused("authenticator failed", _connack(_SERVER_UNAVAILABLE)) from exc
        if principal is None:
            code = _NOT_AUTHORIZED if connect.username is None else _BAD_CREDENTIALS
            raise _Refused(f"credentials refused for user {connect.username!r}", _connack(code))
        holder = _principal_of(self.sessions.get(connect.client_id, (None, None))[0])
        if holder is not None and holder.name != principal.name:
            reason = f"client id {connect.client_id!r} belongs to another principal"
            raise _Refused(reason, _connack(_IDENTIFIER_REJECTED))
        self._gate.admitted[peer] = principal
        return head + body

    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        handler, session = await super()._initialize_client_session(
            reader, writer, remote_address, remote_port
        )
        # amqtt resumes a persistent session with the peer of its previous connection;
        # the auth plugin finds the gate's decision by the current one.
        session.remote_address, session.remote_port = remote_address, remote_port
        return handler, session

    async def _handle_subscription(
        self,
        client_session: Session,
        handler: BrokerProtocolHandler,
        subscribe_waiter: asyncio.Future[Any],
    ) -> None:
        subscriptions = subscribe_waiter.result()
        codes = [await self.add_subscription(sub, client_session) for sub in subscriptions.topics]
        await handler.mqtt_acknowledge_subscription(subscriptions.packet_id, codes)
        for (topic_filter, qos), code in zip(subscriptions.topics, codes, strict=True):
            if code == _SUBACK_FAILURE:
                continue
            await self.plugins_manager.fire_event(
                BrokerEvents.CLIENT_SUBSCRIBED,
                client_id=client_session.client_id,
                topic=topic_filter,
                qos=qos,
            )
            await self._send_retained(client_session, handler, topic_filter, code)

    async def _send_retained(
        self, session: Session, handler: BrokerProtocolHandler, topic_filter: str, granted: int
    ) -> None:
        sends = []
        for topic, message in list(self.retained_messages.items()):
            if not self._matches(topic, topic_filter):
                continue
            if not await self._gate.allow(session, topic, AmqttAction.RECEIVE):
                continue
            qos = min(granted, message.qos if message.qos is not None else granted)
            sends.append(handler.mqtt_publish(topic, message.data, qos, retain=True))
        for result in await asyncio.gather(*sends, return_exceptions=True):
            if isinstance(result, BaseException):
                log.debug("retained delivery to %s failed: %r", session.client_id, result)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        """Do nothing: amqtt calls this on connect for every client's filters (see module doc).

        Retained messages are sent on SUBSCRIBE (``_send_retained``), as MQTT specifies;
        messages queued for an offline persistent session still arrive on reconnect.
        """


async def _close(writer: WriterAdapter, connack: bytes = b"") -> None:
    with contextlib.suppress(OSError, ConnectionError, RuntimeError):
        if connack:
            writer.write(connack)
            await writer.drain()
        await writer.close()


def _bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bound_port(server: Any) -> int:
    sockets = getattr(server.instance, "sockets", None) or ()
    for sock in sockets:
        return int(sock.getsockname()[1])
    raise MqttError("the broker listener has no socket")


def quiet_library_loggers(level: int = logging.WARNING) -> None:
    """Raise amqtt's (and its helpers') loggers to ``level`` unless already configured."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(level)


class EmbeddedBroker:
    """An in-process MQTT 3.1.1 broker (TCP and WebSocket) with voxwire's access rules.

    Port 0 binds a free port; read the result from :attr:`tcp_port` / :attr:`ws_port`
    after :meth:`start`. ``ws_port=None`` disables the WebSocket listener.
    """

    def __init__(
        self,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        host: str = "127.0.0.1",
        tcp_port: int = 1883,
        ws_port: int | None = 8083,
        session_expiry_s: int | None = 24 * 3600,
        connect_timeout_s: float = 10.0,
        quiet_logs: bool = True,
    ) -> None:
        self.host = host
        self._gate = _Gate(authenticator, authorizer)
        self._ports: dict[str, int | None] = {"default": tcp_port, "ws": ws_port}
        self._session_expiry_s = session_expiry_s
        self._connect_timeout_s = connect_timeout_s
        self._quiet_logs = quiet_logs
        self._broker: _Broker | None = None
        self._bound: dict[str, int] = {}

    @property
    def running(self) -> bool:
        return self._broker is not None

    @property
    def throttled(self) -> int:
        """How often a user's connection was read more slowly (``CLIENT_BYTES_PER_S``)."""
        return self._gate.throttled

    @property
    def tcp_port(self) -> int:
        """The TCP port bound (the configured one until started)."""
        return self._bound.get("default", self._ports["default"] or 0)

    @property
    def ws_port(self) -> int | None:
        """The WebSocket port bound, or None when the WebSocket listener is off."""
        if self._ports["ws"] is None:
            return None
        return self._bound.get("ws", self._ports["ws"])

    @property
    def tcp_url(self) -> str:
        return f"mqtt://{_bind(self.host, self.tcp_port)}"

    @property
    def ws_url(self) -> str | None:
        port = self.ws_port
        return None if port is None else f"ws://{_bind(self.host, port)}/mqtt"

    def _amqtt_config(self) -> dict[str, Any]:
        listeners: dict[str, Any] = {}
        for name, port in self._ports.items():
            if port is not None:
                kind = "tcp" if name == "default" else "ws"
                listeners[name] = {"type": kind, "bind": _bind(self.host, port)}
        plugins = {
            f"{__name__}._AuthPlugin": {"gate": self._gate},
            f"{__name__}._TopicPlugin": {"gate": self._gate},
        }
        return {
            "listeners": listeners,
            "plugins": plugins,
            "session_expiry_interval": self._session_expiry_s,
        }

    async def start(self) -> None:
        """Bind the listeners and start serving; raises MqttError when it cannot."""
        if self._broker is not None:
            return
        if self._quiet_logs:
            quiet_library_loggers()
        if amqtt.__version__ != _AMQTT_VERSION:
            log.warning(
                "embedded broker expects amqtt %s, found %s", _AMQTT_VERSION, amqtt.__version__
            )
        broker = _Broker(self._amqtt_config(), self._gate, self._connect_timeout_s)
        try:
            await broker.start()
        except Exception as exc:
            for server in broker._servers.values():  # amqtt leaves earlier listeners bound
                with contextlib.suppress(Exception):
                    await server.close_instance()
            raise MqttError(
                f"cannot start the embedded MQTT broker on {self.host}: {exc}",
                hint="is another program listening on the MQTT or WebSocket port?",
            ) from exc
        self._bound = {name: _bound_port(server) for name, server in broker._servers.items()}
        self._broker = broker
        log.info(
            "embedded MQTT broker listening on %s%s",
            self.tcp_url,
            f" and {self.ws_url}" if self.ws_url else "",
        )

    async def stop(self) -> None:
        """Disconnect every client and close the listeners; retained messages are lost."""
        broker, self._broker = self._broker, None
        if broker is None:
            return
        try:
            await broker.shutdown()
        finally:
            self._gate.admitted.clear()
            log.info("embedded MQTT broker on %s stopped", self.tcp_url)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
