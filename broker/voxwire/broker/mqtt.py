"""A publisher-side MQTT connection for voxwire's server components (paho-mqtt 2.x).

:class:`MqttConnection` holds one persistent session: a stable client id, clean
start off and a session expiry on MQTT 5, or clean session off on MQTT 3.1.1.
It tries MQTT 5 first and falls back to 3.1.1 when the broker refuses 5 (CONNACK
0x84 / 0x01) or does not answer the MQTT 5 CONNECT in time. paho's network
thread reconnects by itself; QoS 1 messages published while the connection is
down are kept and sent after the reconnect.

:meth:`MqttConnection.publish` returns a :class:`concurrent.futures.Future` that
completes when the broker acknowledged the message (PUBACK for QoS 1, written
to the socket for QoS 0) and fails with :class:`~voxwire.core.errors.MqttError`,
topic attached, otherwise. :meth:`MqttConnection.publish_async` awaits it
without blocking the event loop; :meth:`MqttConnection.send_many` queues a
batch and returns one asyncio future for all its acknowledgements, resolved
with one wake-up of the loop (the relay's path: a future per message cost more
than the publish itself). The
MQTT 5 message expiry is set only when MQTT 5 was negotiated.

paho's log goes to the ``voxwire.broker.mqtt.paho`` logger, formatted only when
that level is enabled (a log callback would format every packet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from types import TracebackType
from typing import Any, Literal, Protocol, Self

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from voxwire.core.errors import MqttError

log = logging.getLogger(__name__)

Transport = Literal["tcp", "websockets"]
_PROTOCOL_REFUSED = (0x01, 0x84)  # 3.1.1 "unacceptable protocol version", MQTT 5 0x84
_AUTH_REFUSED = (0x04, 0x05, 0x86, 0x87, 0x8C)


class _Attempt:
    """The outcome of one CONNECT: set by paho's thread, read by ``connect``."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reason: ReasonCode | None = None  # None: the connection closed without CONNACK


def _not_a_reconnect_error(record: logging.LogRecord) -> bool:
    """paho logs "Client is not connected" as an error while it reconnects: it is not one."""
    return record.levelno < logging.ERROR or not str(record.msg).startswith(
        "Client is not connected"
    )


_paho_log = logging.getLogger(f"{__name__}.paho")
_paho_log.addFilter(_not_a_reconnect_error)


class _Ack(Protocol):
    """Told once per message whether the broker acknowledged it (error None) or not."""

    def settle(self, error: MqttError | None) -> None: ...


class _FutureAck:
    def __init__(self, future: Future[None]) -> None:
        self.future = future

    def settle(self, error: MqttError | None) -> None:
        with contextlib.suppress(InvalidStateError):  # cancelled by the caller
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)


class _BatchAck:
    """Counts a batch's acknowledgements down; resolves one asyncio future at zero."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._left = count
        self._error: MqttError | None = None
        self._lock = threading.Lock()

    def settle(self, error: MqttError | None) -> None:
        with self._lock:
            self._left -= 1
            if error is not None and self._error is None:
                self._error = error
            if self._left:
                return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if self.future.done():
            return
        if self._error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(self._error)


class MqttConnection:
    """One persistent MQTT session for publishing; thread-safe, usable from asyncio."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        username: str | None = None,
        password: str | None = None,
        transport: Transport = "tcp",
        ws_path: str = "/mqtt",
        tls: ssl.SSLContext | None = None,
        keepalive_s: int = 30,
        session_expiry_s: int = 24 * 3600,
        connect_timeout_s: float = 5.0,
        reconnect_delay_s: tuple[float, float] = (0.2, 10.0),
        max_inflight: int = 20,
    ) -> None:
        if not client_id:
            raise MqttError("a persistent MQTT session needs a client id")
        self.host = host
        self.port = port
        self.client_id = client_id
        self._username = username
        self._password = password
        self._transport = transport
        self._ws_path = ws_path
        self._tls = tls
        self._keepalive_s = keepalive_s
        self._session_expiry_s = session_expiry_s
        self._connect_timeout_s = connect_timeout_s
        self._reconnect_delay_s = reconnect_delay_s
        self._max_inflight = max_inflight
        self._client: paho.Client | None = None
        self._attempt = _Attempt()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[_Ack, str]] = {}
        self._expiry: dict[int, Properties] = {}  # PUBLISH properties by expiry, built once
        self._early: dict[int, ReasonCode | None] = {}  # acknowledged before registered
        self._closing = False
        self.protocol: MQTTProtocolVersion | None = None  # MQTTv5 or MQTTv311 once connected

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect (MQTT 5, else 3.1.1) and start paho's network thread; raises MqttError."""
        if self._client is not None:
            return
        self._closing = False
        for protocol in (paho.MQTTv5, paho.MQTTv311):
            client = self._make_client(protocol)
            reason = self._try_connect(client, protocol)
            if reason is not None and not reason.is_failure:
                self._client, self.protocol = client, protocol
                log.info(
                    "MQTT connected to %s:%s as %s (%s)",
                    self.host,
                    self.port,
                    self.client_id,
                    "MQTT 5" if protocol == paho.MQTTv5 else "MQTT 3.1.1",
                )
                return
            self._stop(client)
            if reason is not None and reason.value not in _PROTOCOL_REFUSED:
                hint = "check the username and password" if reason.value in _AUTH_REFUSED else None
                raise MqttError(f"the MQTT broker refused the connection: {reason}", hint=hint)
            log.debug("MQTT %s refused or unanswered by %s:%s", protocol, self.host, self.port)
        raise MqttError(
            f"the MQTT broker at {self.host}:{self.port} answered neither MQTT 5 nor 3.1.1",
            hint="is it an MQTT broker, and is the transport (tcp/websockets) right?",
        )

    def _make_client(self, protocol: MQTTProtocolVersion) -> paho.Client:
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=protocol,
            transport=self._transport,
            clean_session=None if protocol == paho.MQTTv5 else False,
        )
        if self._transport == "websockets":
            client.ws_set_options(path=self._ws_path)
        if self._tls is not None:
            client.tls_set_context(self._tls)
        if self._username is not None:
            client.username_pw_set(self._username, self._password)
        client.reconnect_delay_set(*self._reconnect_delay_s)  # type: ignore[arg-type]
        client.max_inflight_messages_set(self._max_inflight)
        client.max_queued_messages_set(0)  # unbounded here: callers bound what they have in flight
        client.enable_logger(_paho_log)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        return client

    def _try_connect(self, client: paho.Client, protocol: MQTTProtocolVersion) -> ReasonCode | None:
        self._attempt = _Attempt()
        properties = None
        if protocol == paho.MQTTv5:
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = self._session_expiry_s
        try:
            client.connect(
                self.host,
                self.port,
                keepalive=self._keepalive_s,
                clean_start=False if protocol == paho.MQTTv5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
                properties=properties,
            )
        except (OSError, ValueError) as exc:
            raise MqttError(
                f"cannot reach the MQTT broker at {self.host}:{self.port}: {exc}",
                hint="is the broker running, and the host and port right?",
            ) from exc
        client.loop_start()
        self._attempt.done.wait(self._connect_timeout_s)
        return self._attempt.reason

    @staticmethod
    def _stop(client: paho.Client) -> None:
        client.disconnect()
        client.loop_stop()

    def _on_connect(
        self, client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        attempt = self._attempt
        if not attempt.done.is_set():
            attempt.reason = reason
            attempt.done.set()
            if reason.is_failure:
                client.disconnect()  # no reconnect loop while negotiating
            return
        if reason.is_failure:
            log.warning("MQTT reconnect to %s:%s refused: %s", self.host, self.port, reason)
        else:
            log.info("MQTT reconnected to %s:%s", self.host, self.port)

    def _on_disconnect(
        self, _client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        self._attempt.done.set()  # a CONNECT answered by a closed connection
        if self._client is not None and not self._closing:
            log.warning(
                "MQTT connection to %s:%s lost (%s), reconnecting", self.host, self.port, reason
            )

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.is_connected()

    # -- publishing -------------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
    ) -> Future[None]:
        """Queue a message; the future completes when the broker has acknowledged it."""
        future: Future[None] = Future()
        self._send(topic, payload, qos, retain, expiry_s, _FutureAck(future))
        return future

    async def publish_async(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Publish and wait for the acknowledgement without blocking the event loop."""
        future = self.publish(topic, payload, qos=qos, retain=retain, expiry_s=expiry_s)
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError as exc:
            raise MqttError(f"no acknowledgement within {timeout_s} s", topic=topic) from exc

    def send_many(
        self,
        messages: Sequence[tuple[str, bytes]],
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
    ) -> asyncio.Future[None]:
        """Queue ``(topic, payload)`` pairs in order, now; the future completes once
        the broker has acknowledged every one (or fails with the first error).
        Call it on the event loop that awaits the future."""
        ack = _BatchAck(asyncio.get_running_loop(), len(messages))
        if not messages:
            ack.future.set_result(None)
        for topic, payload in messages:
            self._send(topic, payload, qos, retain, expiry_s, ack)
        return ack.future

    def _send(
        self, topic: str, payload: bytes, qos: int, retain: bool, expiry_s: int | None, ack: _Ack
    ) -> None:
        client = self._client
        if client is None or self._closing:
            raise MqttError("the MQTT connection is not open", topic=topic, hint="call connect()")
        try:
            info = client.publish(
                topic, payload, qos=qos, retain=retain, properties=self._properties(expiry_s)
            )
        except (ValueError, TypeError) as exc:
            ack.settle(MqttError(f"cannot publish: {exc}", topic=topic))
            return
        if info.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE or (
            info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS and qos == 0
        ):
            ack.settle(MqttError(f"publish not sent: {paho.error_string(info.rc)}", topic=topic))
            return
        with self._lock:  # NO_CONN with QoS 1: paho keeps it and sends it after reconnecting
            early = info.mid in self._early
            reason = self._early.pop(info.mid, None)
            if not early:
                self._pending[info.mid] = (ack, topic)
        if early:
            ack.settle(_refusal(topic, reason))

    def _properties(self, expiry_s: int | None) -> Properties | None:
        if expiry_s is None or self.protocol != paho.MQTTv5:
            return None
        properties = self._expiry.get(expiry_s)
        if properties is None:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.MessageExpiryInterval = expiry_s
            self._expiry[expiry_s] = properties
        return properties

    def _on_publish(
        self, _client: paho.Client, _userdata: Any, mid: int, reason: ReasonCode, _props: Any
    ) -> None:
        with self._lock:
            entry = self._pending.pop(mid, None)
            if entry is None:
                self._early[mid] = reason
                return
        ack, topic = entry
        ack.settle(_refusal(topic, reason))

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Disconnect cleanly; publishes not yet acknowledged fail with MqttError."""
        client, self._closing = self._client, True
        if client is not None:
            self._stop(client)
        with self._lock:
            pending, self._pending = self._pending, {}
            self._early.clear()
        for ack, topic in pending.values():
            ack.settle(MqttError("connection closed before the broker acknowledged", topic=topic))
        self._client = None

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _refusal(topic: str, reason: ReasonCode | None) -> MqttError | None:
    if reason is not None and reason.is_failure:
        return MqttError(f"the broker refused the publish: {reason}", topic=topic)
    return None
