"""MQTT -> Kafka: what clients publish goes onto the bus, acknowledged only
after the bus has accepted it.

The bridge subscribes with a shared subscription (``$share/<group>/...``) on a
persistent session, so several bridge processes split the load and the broker
keeps messages while none is connected (for ``session_expiry_s``, a day by
default). The group and the client id name the installation (its namespace):
two installations on one broker must neither split each other's messages nor
take over each other's session. paho runs with
manual acks: the PUBACK for a client's message is sent only once Kafka confirmed
the record, so while Kafka is down clients keep their messages (their in-flight
window fills and they stop sending) instead of losing them.

Client topics (per session, QoS 1) and where they go:

    audio/<sid>/chunk/<n>  -> transcription.audio     (key = sid; PCM16LE 16 kHz mono)
    audio/<sid>/control    -> transcription.audio     (key = sid, same partition,
                                                       so control and audio stay ordered)
    query/<key id>/<qid>/request -> prompt.queries    (key = key id; a SearchQuery)

Each bus record carries the MQTT topic and payload unchanged (a small JSON
envelope, ``origin`` "mqtt"); topic access is enforced by the broker before
anything gets here. The embedded broker speaks MQTT 3.1.1 without shared
subscriptions: there one ingest subscribes directly.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from voxwire.bus import Bus
from voxwire.core.errors import BusError
from voxwire.wire.records import ClientPublish
from voxwire.wire.topics import AUDIO_TOPIC, QUERIES_TOPIC
from voxwire_client.topics import parse_audio_topic, parse_query_topic

log = logging.getLogger(__name__)

INGEST_FILTERS = ("audio/+/chunk/+", "audio/+/control", "query/+/+/request")
SHARE_GROUP = "voxwire-bridge"


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message a client published, as paho delivered it."""

    mid: int
    qos: int
    topic: str
    payload: bytes


def route(topic: str) -> tuple[str, str] | None:
    """(bus topic, key) for a client topic, or None when it is not ours."""
    try:
        return AUDIO_TOPIC, parse_audio_topic(topic).sid
    except ValueError:
        pass
    try:
        query = parse_query_topic(topic)
    except ValueError:
        return None
    return (QUERIES_TOPIC, query.key_id) if query.kind == "request" else None


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
    ) -> None:
        self._bus = bus
        self._session_expiry_s = session_expiry_s
        self._host, self._port = host, port
        self._limit = asyncio.Semaphore(max_in_flight)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected = threading.Event()
        self.forwarded = 0
        self.dropped = 0
        self._share_group = share_group  # None: a plain subscription (MQTT 3.1.1)
        shared = share_group is not None
        self._protocol = paho.MQTTv5 if shared else paho.MQTTv311
        client = make_client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=self._protocol,
            clean_session=None if shared else False,
            manual_ack=True,
        )
        client.username_pw_set(username, password)
        if tls is not None:
            client.tls_set_context(tls)
        client.max_inflight_messages_set(max_in_flight)
        client.reconnect_delay_set(1, 10)
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        self._client = client

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            log.error("bridge ingest: MQTT connection refused: %s", reason)
            return
        for topic_filter in INGEST_FILTERS:
            prefix = f"$share/{self._share_group}/" if self._share_group else ""
            client.subscribe(prefix + topic_filter, qos=1)
        self._connected.set()

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        inbound = Inbound(msg.mid, msg.qos, msg.topic, bytes(msg.payload))
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._forward(inbound), self._loop)

    async def _forward(self, message: Inbound) -> None:
        async with self._limit:
            target = route(message.topic)
            if target is None:
                self.dropped += 1
                log.warning(
                    "bridge ingest: no route for topic %r; acknowledged and dropped", message.topic
                )
                self._ack(message)
                return
            topic, key = target
            delay = 0.5
            while True:
                try:
                    record = ClientPublish(topic=message.topic, payload=message.payload)
                    await self._bus.produce(topic, key, record.encode())
                    break
                except BusError as exc:  # Kafka unavailable: hold the client's message
                    log.warning("bridge ingest: bus refused %s (%s); retrying", message.topic, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)
            self._ack(message)
            self.forwarded += 1

    def _ack(self, message: Inbound) -> None:
        if message.qos > 0:
            self._client.ack(message.mid, message.qos)

    async def run(self) -> None:
        """Connect and forward until cancelled."""
        self._loop = asyncio.get_running_loop()
        if self._protocol == paho.MQTTv5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = self._session_expiry_s
            self._client.connect_async(
                self._host, self._port, keepalive=30, clean_start=False, properties=props
            )
        else:
            self._client.connect_async(self._host, self._port, keepalive=30)
        self._client.loop_start()
        try:
            await asyncio.Event().wait()
        finally:
            self._client.disconnect()
            self._client.loop_stop()
