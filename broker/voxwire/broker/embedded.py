"""The embedded MQTT broker: amqtt 0.12.1 in-process, with voxwire's access rules.

One-machine mode runs this broker inside the voxwire process; the distributed
mode uses EMQX or Mosquitto instead. Both see the same two small interfaces:

- an :class:`~voxwire.access.principal.Authenticator` turns CONNECT credentials
  into a :class:`~voxwire.access.principal.Principal` (or refuses them), and
- an :class:`~voxwire.access.principal.Authorizer` decides per topic whether a principal may
  ``publish``, ``subscribe`` (the topic is then a filter) or ``receive``.

Both are awaited on the broker's event loop.

Usage::

    async with EmbeddedBroker(authenticator, authorizer, tcp_port=1883) as broker:
        ...  # clients connect to broker.tcp_url or broker.ws_url

Everything amqtt-specific stays in this package. This module binds the
listeners and runs each connection through a gate that reads the first packet
itself, bounded in size and time, refusing MQTT 5 and bad credentials before
amqtt sees the connection (:mod:`voxwire.broker.gate`, CONNECT parsing in
:mod:`voxwire.broker.connect`). Retained messages go only to the client that
subscribes, and only where the authorizer allows ``receive``
(:mod:`voxwire.broker.retained`).

amqtt keeps retained messages and sessions in memory: stopping the broker
loses them. Any WebSocket path is accepted (mqtt.js uses ``/mqtt``). Logs go to
``voxwire.broker.embedded`` and the loggers of the modules above; amqtt's own
loggers are set to WARNING on start (see :data:`NOISY_LOGGERS`), and a failed
WebSocket handshake (an HTTP probe) is logged at DEBUG instead of as an error
with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from functools import partial
from pathlib import Path
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
from amqtt.contexts import ListenerType
from amqtt.errors import NoDataError
from websockets import Subprotocol
from websockets.asyncio.server import Server as WebSocketServer
from websockets.asyncio.server import serve as websockets_serve

from voxwire.access.principal import Authenticator, Authorizer, Principal
from voxwire.broker.connect import Refused
from voxwire.broker.gate import (
    AccessGate,
    AuthPlugin,
    ReplayReader,
    TopicPlugin,
    close_connection,
    principal_of,
)
from voxwire.broker.retained import RetainedBroker
from voxwire.core.errors import MqttError

if TYPE_CHECKING:
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
    from amqtt.session import Session
    from websockets.asyncio.server import ServerConnection

log = logging.getLogger(__name__)

#: Library loggers set to WARNING when a broker starts, unless already configured.
NOISY_LOGGERS = ("amqtt", "transitions", f"{__name__}.websockets")

_AMQTT_VERSION = "0.12.1"


class _WebSocketLog(logging.LoggerAdapter[logging.Logger]):
    """The WebSocket listener's log: a failed handshake (HTTP probe, scanner) is not an error."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg == "opening handshake failed":
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


def _plugin_path(plugin: type) -> str:
    return f"{plugin.__module__}.{plugin.__qualname__}"


class _Broker(RetainedBroker):
    """amqtt's broker behind the gate, with retained delivery that respects the authorizer."""

    def __init__(self, config: dict[str, Any], gate: AccessGate, connect_timeout_s: float) -> None:
        super().__init__(config, gate)
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
        if ssl_context is not None:  # amqtt asks for client certificates: browsers cancel then
            ssl_context.verify_mode = ssl.CERT_NONE
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
            await close_connection(writer)
            return
        try:
            first = await asyncio.wait_for(
                self._gate.admit(reader, peer, self._holder), self._connect_timeout_s
            )
        except Refused as exc:
            log.info("refused MQTT connection from %s:%s: %s", *peer, exc)
            await close_connection(writer, exc.connack)
            return
        except (NoDataError, TimeoutError, OSError) as exc:  # probes, scanners, slow clients
            log.debug("no MQTT CONNECT from %s:%s: %r", *peer, exc)
            await close_connection(writer)
            return
        limits = self._gate.limits_for(peer)
        try:
            await self.external_connected(
                ReplayReader(first, reader, writer, peer, self._gate, limits),
                writer,
                listener_name,
            )
        except (OSError, NoDataError) as exc:
            log.debug("MQTT connection from %s:%s ended: %r", *peer, exc)
        finally:
            self._gate.admitted.pop(peer, None)

    def _holder(self, client_id: str) -> Principal | None:
        """The principal of the session that holds ``client_id``, if any."""
        return principal_of(self.sessions.get(client_id, (None, None))[0])

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
    after :meth:`start`. ``ws_port=None`` disables the WebSocket listener;
    ``ws_tls`` (PEM certificate chain, PEM key) makes it a TLS one (``wss://``).
    """

    def __init__(
        self,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        host: str = "127.0.0.1",
        tcp_port: int = 1883,
        ws_port: int | None = 8083,
        ws_tls: tuple[Path, Path] | None = None,
        session_expiry_s: int | None = 24 * 3600,
        connect_timeout_s: float = 10.0,
        quiet_logs: bool = True,
    ) -> None:
        self.host = host
        self._gate = AccessGate(authenticator, authorizer)
        self._ports: dict[str, int | None] = {"default": tcp_port, "ws": ws_port}
        self._ws_tls = ws_tls
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
        scheme = "ws" if self._ws_tls is None else "wss"
        return None if port is None else f"{scheme}://{_bind(self.host, port)}/mqtt"

    def _amqtt_config(self) -> dict[str, Any]:
        listeners: dict[str, Any] = {}
        for name, port in self._ports.items():
            if port is not None:
                kind = "tcp" if name == "default" else "ws"
                listeners[name] = {"type": kind, "bind": _bind(self.host, port)}
                if kind == "ws" and self._ws_tls is not None:
                    cert, key = self._ws_tls
                    listeners[name] |= {"ssl": True, "certfile": str(cert), "keyfile": str(key)}
        plugins = {
            _plugin_path(AuthPlugin): {"gate": self._gate},
            _plugin_path(TopicPlugin): {"gate": self._gate},
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
