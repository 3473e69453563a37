"""The one MQTT connection of voxwire's server parts (paho-mqtt 2.x).

:class:`BrokerConnection` owns a paho client and the policies every server part
shares: the publisher (:class:`~voxwire.broker.mqtt.MqttConnection`), the bridge's
ingest (:class:`~voxwire.bridge.ingest.MqttIngest`) and the dynamic-security
admin (:class:`~voxwire.broker.dynsec.DynsecAccess`) are built on it.

- **Protocol.** MQTT 5 first; MQTT 3.1.1 when the broker refuses 5 (CONNACK
  0x84 / 0x01) or does not answer the MQTT 5 CONNECT within
  ``connect_timeout_s``. Any other refusal raises
  :class:`~voxwire.core.errors.MqttError`.
- **Session.** :attr:`ConnectOptions.session_expiry_s` set: a persistent session
  (clean start off and that session expiry on MQTT 5, clean session off on
  3.1.1); ``None``: a clean session.
- **Reconnect.** Once connected, paho's network thread reconnects by itself,
  waiting :class:`ReconnectPolicy` delays; subscriptions are sent again on every
  CONNACK, and QoS 1 messages published meanwhile are sent after the reconnect.
  :meth:`BrokerConnection.connect_retrying` applies the same delays to the first
  connect, for services that must wait for their broker instead of failing.
- **Publishing.** :meth:`BrokerConnection.publish` reports each message's
  outcome to an :class:`~voxwire.broker.handoff.Ack` (PUBACK for QoS 1, written
  to the socket for QoS 0); the MQTT 5 message expiry is set only when MQTT 5
  was negotiated.
- **Receiving.** All messages of the connection go to one handler, on paho's
  thread or, given a loop, on that loop through the
  :class:`~voxwire.broker.handoff.LoopBridge`. With
  :attr:`ConnectOptions.manual_ack` a QoS 1 message is acknowledged only when the
  receiver calls :meth:`BrokerConnection.ack`. :meth:`BrokerConnection.connect`
  returns once the broker has acknowledged the subscription (SUBACK), or after
  ``connect_timeout_s`` with a warning: a message published after it returns
  reaches the handler, even on a clean session.
- **Errors.** paho's return codes and exceptions become ``MqttError`` here, with
  the topic attached.
- **Liveness.** :attr:`BrokerConnection.silence` (a
  :class:`~voxwire.core.liveness.Silence` watch) reports a connection that has
  heard nothing from the broker for :data:`SILENT_KEEPALIVES` keepalives: no
  packet at all, not even the PINGRESP an idle connection gets every keepalive.
  paho closes a connection whose ping goes unanswered and reconnects, so a
  broker that accepts TCP connections and answers nothing (frozen, wedged)
  leaves a process that looks alive and delivers nothing; the watch sees
  through that. paho 2.2 has no callback for PINGRESP: every packet it reads
  goes through ``Client._packet_handle``, which :func:`_hear_packets` wraps
  (paho is pinned; ``tests/broker/test_silence.py`` notices a paho that changed it).

Why paho and not aiomqtt: aiomqtt has no manual acknowledgements (the ingest
must not PUBACK a client's message before Kafka has it; aiomqtt issue #345 is
open), no reconnect (its client ends with the connection), and settles each
publish with its own await, where the relay settles a whole batch with one
wake-up of the loop. It would cover none of the three users whole, so it is not
a dependency. The client SDK (``voxwire_client._mqtt``) has a paho wrapper of
its own: it is a separate distribution and cannot import server code.

paho's log goes to the ``voxwire.broker.connection.paho`` logger, formatted only
when that level is enabled (a log callback would format every packet).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from voxwire.broker.handoff import NO_ACK, Ack, LoopBridge
from voxwire.core.errors import MqttError
from voxwire.core.liveness import Silence

log = logging.getLogger(__name__)

Transport = Literal["tcp", "websockets"]
MakeClient = Callable[..., paho.Client]
_PROTOCOL_REFUSED = (0x01, 0x84)  # 3.1.1 "unacceptable protocol version", MQTT 5 0x84
_AUTH_REFUSED = (0x04, 0x05, 0x86, 0x87, 0x8C)
SILENT_KEEPALIVES = 3
"""Keepalives without a packet from the broker before a connection counts as stuck:
an idle connection hears a PINGRESP every keepalive, and paho gives up on an
unanswered ping after a second one and reconnects."""


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """Delays between connection attempts: from ``first_s``, doubling up to ``max_s``."""

    first_s: float = 0.2
    max_s: float = 10.0

    def delays(self) -> Iterator[float]:
        delay = self.first_s
        while True:
            yield delay
            delay = min(delay * 2, self.max_s)


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """Where and how a :class:`BrokerConnection` connects."""

    host: str
    port: int
    client_id: str
    username: str | None = None
    password: str | None = None
    transport: Transport = "tcp"
    ws_path: str = "/mqtt"
    tls: ssl.SSLContext | None = None
    keepalive_s: int = 30
    session_expiry_s: int | None = 24 * 3600  # None: a clean session
    connect_timeout_s: float = 5.0
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    max_inflight: int = 20
    manual_ack: bool = False


@dataclass(frozen=True, slots=True)
class Received:
    """One message the broker delivered."""

    topic: str
    payload: bytes
    qos: int
    mid: int
    response_topic: str | None = None
    """MQTT 5: where the sender wants the answer to a request."""
    correlation: bytes | None = None
    """MQTT 5: what the sender matches that answer with (echoed as is)."""


Handler = Callable[[Received], None]


@dataclass(frozen=True, slots=True)
class _Subscription:
    filters: tuple[str, ...]
    handler: Handler
    bridge: LoopBridge | None  # None: the handler runs on paho's thread


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


class BrokerConnection:
    """One MQTT session with the broker; thread-safe."""

    def __init__(self, options: ConnectOptions, *, make_client: MakeClient = paho.Client) -> None:
        if not options.client_id:
            raise MqttError("an MQTT connection needs a client id")
        self.options = options
        self._make_client = make_client
        self._client: paho.Client | None = None  # set at the CONNACK that accepted it
        self._attempt = _Attempt()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Ack, str]] = {}
        self._expiry: dict[int, Properties] = {}  # PUBLISH properties by expiry, built once
        self._early: dict[int, ReasonCode | None] = {}  # acknowledged before registered
        self._subscription: _Subscription | None = None
        self._subscribed = threading.Event()  # the last SUBSCRIBE sent is acknowledged
        self._suback_mid: int | None = None
        self._closing = False
        self.protocol: MQTTProtocolVersion | None = None  # MQTTv5 or MQTTv311 once connected
        where = f"{options.host}:{options.port}"
        self.silence = Silence(
            f"the MQTT connection {options.client_id} to {where}",
            SILENT_KEEPALIVES * options.keepalive_s,
        )
        """Liveness: from the first connect until close, the broker must be heard."""

    # -- connecting -------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect (MQTT 5, else 3.1.1) and start paho's network thread; raises MqttError."""
        if self._client is not None:
            return
        with self._lock:
            self._closing = False
        self.silence.watch()
        host, port = self.options.host, self.options.port
        for protocol in (paho.MQTTv5, paho.MQTTv311):
            client = self._new_client(protocol)
            reason = self._try_connect(client, protocol)
            if reason is not None and not reason.is_failure:
                with self._lock:
                    closed = self._closing
                if closed:  # close() came while connecting: its caller has given up
                    self._stop(client)
                    self._client = None
                    raise MqttError("the MQTT connection was closed while connecting")
                self.protocol = protocol
                self._wait_for_suback()
                log.info(
                    "MQTT connected to %s:%s as %s (%s)",
                    host,
                    port,
                    self.options.client_id,
                    "MQTT 5" if protocol == paho.MQTTv5 else "MQTT 3.1.1",
                )
                return
            self._stop(client)
            self._client = None  # a CONNACK that came after the wait ended
            if reason is not None and reason.value not in _PROTOCOL_REFUSED:
                hint = "check the username and password" if reason.value in _AUTH_REFUSED else None
                raise MqttError(f"the MQTT broker refused the connection: {reason}", hint=hint)
            log.debug("MQTT %s refused or unanswered by %s:%s", protocol, host, port)
        raise MqttError(
            f"the MQTT broker at {host}:{port} answered neither MQTT 5 nor 3.1.1",
            hint="is it an MQTT broker, and is the transport (tcp/websockets) right?",
        )

    def _wait_for_suback(self) -> None:
        if self._subscription is None or self._subscribed.wait(self.options.connect_timeout_s):
            return
        log.warning(
            "MQTT broker has not acknowledged the subscription to %s within %.0f s",
            ", ".join(self._subscription.filters),
            self.options.connect_timeout_s,
        )

    async def connect_retrying(self) -> None:
        """Connect without blocking the loop, retrying with the reconnect delays until
        the broker accepts (for services that wait for their broker)."""
        for delay in self.options.reconnect.delays():
            try:
                await asyncio.to_thread(self.connect)
                return
            except MqttError as exc:
                log.warning("MQTT connect failed (%s); retrying in %.1f s", exc, delay)
            await asyncio.sleep(delay)

    def _new_client(self, protocol: MQTTProtocolVersion) -> paho.Client:
        options = self.options
        persistent = options.session_expiry_s is not None
        client = self._make_client(
            CallbackAPIVersion.VERSION2,
            client_id=options.client_id,
            protocol=protocol,
            transport=options.transport,
            clean_session=None if protocol == paho.MQTTv5 else not persistent,
            manual_ack=options.manual_ack,
        )
        if options.transport == "websockets":
            client.ws_set_options(path=options.ws_path)
        if options.tls is not None:
            client.tls_set_context(options.tls)
        if options.username is not None:
            client.username_pw_set(options.username, options.password)
        delays = options.reconnect
        client.reconnect_delay_set(delays.first_s, delays.max_s)  # type: ignore[arg-type]
        client.max_inflight_messages_set(options.max_inflight)
        client.max_queued_messages_set(0)  # unbounded here: callers bound what they have in flight
        client.enable_logger(_paho_log)
        _hear_packets(client, self.silence.heard)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    def _try_connect(self, client: paho.Client, protocol: MQTTProtocolVersion) -> ReasonCode | None:
        options = self.options
        self._attempt = _Attempt()
        properties = None
        if protocol == paho.MQTTv5 and options.session_expiry_s is not None:
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = options.session_expiry_s
        try:
            client.connect(
                options.host,
                options.port,
                keepalive=options.keepalive_s,
                clean_start=(
                    options.session_expiry_s is None
                    if protocol == paho.MQTTv5
                    else paho.MQTT_CLEAN_START_FIRST_ONLY  # 3.1.1: the client's clean_session
                ),
                properties=properties,
            )
        except (OSError, ValueError) as exc:
            raise MqttError(
                f"cannot reach the MQTT broker at {options.host}:{options.port}: {exc}",
                hint="is the broker running, and the host and port right?",
            ) from exc
        client.loop_start()
        self._attempt.done.wait(options.connect_timeout_s)
        return self._attempt.reason

    @staticmethod
    def _stop(client: paho.Client) -> None:
        client.disconnect()
        client.loop_stop()

    def _on_connect(
        self, client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        if not reason.is_failure:
            self._client = client
            self._subscribe(client)
        attempt = self._attempt
        if not attempt.done.is_set():
            attempt.reason = reason
            attempt.done.set()
            if reason.is_failure:
                client.disconnect()  # no reconnect loop while negotiating
            return
        host, port = self.options.host, self.options.port
        if reason.is_failure:
            log.warning("MQTT reconnect to %s:%s refused: %s", host, port, reason)
        else:
            log.info("MQTT reconnected to %s:%s", host, port)

    def _on_disconnect(
        self, _client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        self._attempt.done.set()  # a CONNECT answered by a closed connection
        if self._client is not None and not self._closing:
            log.warning(
                "MQTT connection to %s:%s lost (%s), reconnecting",
                self.options.host,
                self.options.port,
                reason,
            )

    @property
    def connected(self) -> bool:
        client = self._client
        return client is not None and client.is_connected()

    # -- receiving --------------------------------------------------------------------------

    def subscribe(
        self,
        filters: Sequence[str],
        handler: Handler,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Subscribe (QoS 1) to ``filters`` on every CONNACK and send every message to
        ``handler``: on ``loop`` when given, else on paho's thread. One handler per
        connection; call it before :meth:`connect`."""
        bridge = LoopBridge(loop) if loop is not None else None
        self._subscription = _Subscription(tuple(filters), handler, bridge)
        client = self._client
        if client is not None and client.is_connected():
            self._subscribe(client)

    def _subscribe(self, client: paho.Client) -> None:
        subscription = self._subscription
        if subscription is None:
            return
        self._subscribed.clear()
        if not subscription.filters:
            self._subscribed.set()
            return
        _, self._suback_mid = client.subscribe([(f, 1) for f in subscription.filters])

    def _on_subscribe(
        self, _client: paho.Client, _userdata: Any, mid: int, _reasons: Any, _props: Any
    ) -> None:
        if mid == self._suback_mid:
            self._subscribed.set()

    def _on_message(self, client: paho.Client, _userdata: Any, msg: paho.MQTTMessage) -> None:
        props = msg.properties
        received = Received(
            msg.topic,
            bytes(msg.payload),
            msg.qos,
            msg.mid,
            getattr(props, "ResponseTopic", None),
            getattr(props, "CorrelationData", None),
        )
        subscription = self._subscription
        if subscription is None:
            if self.options.manual_ack and received.qos > 0:
                client.ack(received.mid, received.qos)  # nobody would acknowledge it
        elif subscription.bridge is None:
            subscription.handler(received)
        else:
            subscription.bridge.post(subscription.handler, received)

    def ack(self, message: Received) -> None:
        """Acknowledge a received QoS 1 message (with ``manual_ack``; else paho did)."""
        client = self._client
        if client is not None and self.options.manual_ack and message.qos > 0:
            client.ack(message.mid, message.qos)

    # -- publishing -------------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
        ack: Ack = NO_ACK,
        correlation: bytes | None = None,
    ) -> None:
        """Queue a message; ``ack`` learns whether the broker acknowledged it;
        ``correlation``: MQTT 5 correlation data (dropped on MQTT 3.1.1).
        Raises MqttError when the connection is not open."""
        client = self._client
        if client is None or self._closing:
            raise MqttError("the MQTT connection is not open", topic=topic, hint="call connect()")
        try:
            info = client.publish(
                topic,
                payload,
                qos=qos,
                retain=retain,
                properties=self._properties(expiry_s, correlation),
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

    def _properties(self, expiry_s: int | None, correlation: bytes | None) -> Properties | None:
        if (expiry_s is None and correlation is None) or self.protocol != paho.MQTTv5:
            return None
        if correlation is not None:  # one answer's own
            answer = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            answer.CorrelationData = correlation
            if expiry_s is not None:
                answer.MessageExpiryInterval = expiry_s
            return answer
        assert expiry_s is not None
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
        with self._lock:
            client, self._closing = self._client, True
        self.silence.unwatch()
        if client is not None:
            self._stop(client)
        with self._lock:
            pending, self._pending = self._pending, {}
            self._early.clear()
        for ack, topic in pending.values():
            ack.settle(MqttError("connection closed before the broker acknowledged", topic=topic))
        self._client = None


def _hear_packets(client: paho.Client, heard: Callable[[], None]) -> None:
    """Call ``heard`` after each packet from the broker that ``client`` handles
    (CONNACK, PUBLISH, PUBACK, SUBACK, PINGRESP, ...), on paho's thread."""
    handle = client._packet_handle

    def handled() -> MQTTErrorCode:
        rc = handle()
        heard()
        return rc

    client._packet_handle = handled  # type: ignore[method-assign]


def _refusal(topic: str, reason: ReasonCode | None) -> MqttError | None:
    if reason is not None and reason.is_failure:
        return MqttError(f"the broker refused the publish: {reason}", topic=topic)
    return None
