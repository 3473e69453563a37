"""MQTT -> Kafka: what clients publish goes onto the bus, acknowledged only
after the bus has accepted it.

The bridge subscribes with a shared subscription (``$share/<group>/...``) on a
persistent session, so several bridge processes split the load and the broker
keeps messages while none is connected (for ``session_expiry_s``, a day by
default). The group and the client id name the installation (its namespace):
two installations on one broker must neither split each other's messages nor
take over each other's session. The connection
(:class:`~voxwire.broker.connection.BrokerConnection`: protocol fallback,
reconnects, TLS) runs with manual acks: the PUBACK for a client's message is
sent only once Kafka confirmed the record, so while Kafka is down clients keep
their messages (their in-flight window fills and they stop sending) instead of
losing them. Messages cross from paho's thread to the event loop through the
connection; each is forwarded by a task of its own, at most ``max_in_flight``
at a time.

Client topics (per session, QoS 1) and where they go:

    audio/<sid>/chunk/<n>  -> transcription.audio     (key = sid; PCM16LE 16 kHz mono)
    audio/<sid>/control    -> transcription.audio     (key = sid, same partition,
                                                       so control and audio stay ordered)
    query/<key id>/<qid>/request -> prompt.queries    (key = key id; a SearchQuery
                                                       or a session's request)
    query/<key id>/<upload id>/part/<n> -> prompt.queries (key = key id; a part of
                                                       a file uploaded over MQTT)

Each bus record carries the MQTT topic and payload unchanged (a small JSON
envelope, ``origin`` "mqtt"); topic access is enforced by the broker before
anything gets here. The embedded broker speaks MQTT 3.1.1 without shared
subscriptions: there one ingest subscribes directly. The ingest waits for its
broker: a failed first connect is retried with the connection's reconnect delays.

On a broker other installations may share (``is_ours`` and ``is_our_key``
given), the audio topics of a session this installation does not have, and the
query topics of a key it did not issue (requests, and the parts of files
uploaded over MQTT), are acknowledged and dropped instead
(:mod:`voxwire.bridge.sessions_gate`): each installation's Kafka log holds its
own clients' audio and questions alone, in the order they came.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable

import paho.mqtt.client as paho

from voxwire.bridge.sessions_gate import SessionGate
from voxwire.broker.connection import BrokerConnection, ConnectOptions, Received, ReconnectPolicy
from voxwire.bus import Bus
from voxwire.core.errors import BusError
from voxwire.core.liveness import Silence
from voxwire.core.metrics import INGEST_FOREIGN, INGESTED
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC, QUERIES_TOPIC
from voxwire_client.topics import parse_audio_topic, parse_query_topic

log = logging.getLogger(__name__)

INGEST_FILTERS = ("audio/+/chunk/+", "audio/+/control", "query/+/+/request", "query/+/+/part/+")
SHARE_GROUP = "voxwire-bridge"
_RECONNECT = ReconnectPolicy(1.0, 10.0)


Route = tuple[str, str]
"""Where a client topic goes: (bus topic, key)."""


def route(topic: str) -> Route | None:
    """(bus topic, key) for a client topic, or None when it is not ours."""
    try:
        return AUDIO_TOPIC, parse_audio_topic(topic).sid
    except ValueError:
        pass
    try:
        query = parse_query_topic(topic)
    except ValueError:
        return None
    return (QUERIES_TOPIC, query.key_id) if query.kind in ("request", "part") else None


def subscription_filters(share_group: str | None) -> tuple[str, ...]:
    """The ingest's topic filters, shared in ``share_group`` when one is given."""
    prefix = f"$share/{share_group}/" if share_group else ""
    return tuple(prefix + topic_filter for topic_filter in INGEST_FILTERS)


class MqttIngest:
    """Moves client messages from the broker onto the bus with manual acks."""

    def __init__(
        self,
        bus: Bus,
        host: str,
        port: int,
        *,
        client_id: str,
        username: str,
        password: str,
        max_in_flight: int = 1000,
        share_group: str | None = SHARE_GROUP,
        make_client: Callable[..., paho.Client] = paho.Client,
        tls: ssl.SSLContext | None = None,
        session_expiry_s: int = 24 * 3600,
        is_ours: Callable[[str], Awaitable[bool]] | None = None,
        is_our_key: Callable[[str], Awaitable[bool]] | None = None,
        keepalive_s: int = 30,
    ) -> None:
        """``is_ours(sid)``: whether session ``sid`` is this installation's, and
        ``is_our_key(key_id)`` whether it issued key ``key_id``, on a broker others
        may share (None: every session and key is, as on the embedded broker)."""
        self._bus = bus
        self._limit = asyncio.Semaphore(max_in_flight)
        self._filters = subscription_filters(share_group)  # no group: a plain subscription
        self._tasks: set[asyncio.Task[None]] = set()
        self.forwarded = 0
        self.dropped = 0
        self.foreign = 0
        """Messages of another installation's sessions or keys, acknowledged and dropped."""
        checks = {AUDIO_TOPIC: is_ours, QUERIES_TOPIC: is_our_key}
        self._gates: dict[str, SessionGate[tuple[Received, Route]]] = {
            topic: SessionGate(check, self._decide)
            for topic, check in checks.items()
            if check is not None
        }
        self._connection = BrokerConnection(
            ConnectOptions(
                host,
                port,
                client_id,
                username=username,
                password=password,
                tls=tls,
                session_expiry_s=session_expiry_s,
                keepalive_s=keepalive_s,
                reconnect=_RECONNECT,
                max_inflight=max_in_flight,
                manual_ack=True,
            ),
            make_client=make_client,
        )

    @property
    def connected(self) -> bool:
        """Whether the connection to the broker is up now."""
        return self._connection.connected

    @property
    def silence(self) -> Silence:
        """Liveness: whether the broker has been heard lately (see the connection)."""
        return self._connection.silence

    def _receive(self, message: Received) -> None:
        """On the event loop: forward ``message`` in a task of its own (once its
        session or key is known to be ours, where that is checked)."""
        target = route(message.topic)
        gate = None if target is None else self._gates.get(target[0])
        if gate is not None and target is not None:
            gate.admit(target[1], (message, target))
            return
        self._spawn(message, target)

    def _decide(self, routed: tuple[Received, Route], ours: bool) -> None:
        message, target = routed
        if ours:
            self._spawn(message, target)
            return
        self.foreign += 1
        INGEST_FOREIGN.inc()
        self._connection.ack(message)

    def _spawn(self, message: Received, target: Route | None) -> None:
        task = asyncio.get_running_loop().create_task(self._forward(message, target))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(self, message: Received, target: Route | None) -> None:
        async with self._limit:
            if target is None:
                self.dropped += 1
                log.warning(
                    "bridge ingest: no route for topic %r; acknowledged and dropped", message.topic
                )
                self._connection.ack(message)
                return
            topic, key = target
            delay = 0.5
            while True:
                try:
                    record = ClientPublish(
                        topic=message.topic,
                        payload=message.payload,
                        response_topic=message.response_topic,
                        correlation=message.correlation,
                    )
                    await self._bus.produce(topic, key, record.encode())
                    break
                except BusError as exc:  # Kafka unavailable: hold the client's message
                    log.warning("bridge ingest: bus refused %s (%s); retrying", message.topic, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)
            self._connection.ack(message)
            self.forwarded += 1
            INGESTED.inc()

    async def run(self) -> None:
        """Connect and forward until cancelled."""
        self._connection.subscribe(self._filters, self._receive, loop=asyncio.get_running_loop())
        try:
            await self._connection.connect_retrying()
            await asyncio.Event().wait()
        finally:
            for gate in self._gates.values():
                gate.close()
            self._connection.close()
