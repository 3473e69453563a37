"""The publisher of voxwire's server components: the relay and the query service.

:class:`MqttConnection` is a :class:`~voxwire.broker.connection.BrokerConnection`
on one persistent session: a stable client id, clean start off and a session
expiry on MQTT 5, or clean session off on MQTT 3.1.1 (protocol fallback,
reconnects and the MQTT 5 message expiry are the connection's; see there).

:meth:`MqttConnection.publish` returns a :class:`concurrent.futures.Future` that
completes when the broker acknowledged the message (PUBACK for QoS 1, written
to the socket for QoS 0) and fails with :class:`~voxwire.core.errors.MqttError`,
topic attached, otherwise. :meth:`MqttConnection.publish_async` awaits it
without blocking the event loop; :meth:`MqttConnection.send_many` queues a
batch and returns one asyncio future for all its acknowledgements, resolved
with one wake-up of the loop (the relay's path).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Self

from paho.mqtt.enums import MQTTProtocolVersion

from voxwire.broker.connection import BrokerConnection, ConnectOptions, ReconnectPolicy, Transport
from voxwire.broker.handoff import BatchAck, FutureAck
from voxwire.core.errors import MqttError
from voxwire.core.liveness import Silence

__all__ = ["MqttConnection", "Transport"]


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
        self._connection = BrokerConnection(
            ConnectOptions(
                host,
                port,
                client_id,
                username=username,
                password=password,
                transport=transport,
                ws_path=ws_path,
                tls=tls,
                keepalive_s=keepalive_s,
                session_expiry_s=session_expiry_s,
                connect_timeout_s=connect_timeout_s,
                reconnect=ReconnectPolicy(*reconnect_delay_s),
                max_inflight=max_inflight,
            )
        )

    def connect(self) -> None:
        """Connect (MQTT 5, else 3.1.1) and start paho's network thread; raises MqttError."""
        self._connection.connect()

    @property
    def connected(self) -> bool:
        return self._connection.connected

    @property
    def silence(self) -> Silence:
        """Liveness: whether the broker has been heard lately (see the connection)."""
        return self._connection.silence

    @property
    def protocol(self) -> MQTTProtocolVersion | None:
        """MQTTv5 or MQTTv311 once connected."""
        return self._connection.protocol

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
        correlation: bytes | None = None,
    ) -> Future[None]:
        """Queue a message; the future completes when the broker has acknowledged it.
        ``correlation``: MQTT 5 correlation data of an answer."""
        future: Future[None] = Future()
        self._connection.publish(
            topic,
            payload,
            qos=qos,
            retain=retain,
            expiry_s=expiry_s,
            ack=FutureAck(future),
            correlation=correlation,
        )
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
        correlation: bytes | None = None,
    ) -> None:
        """Publish and wait for the acknowledgement without blocking the event loop."""
        future = self.publish(
            topic, payload, qos=qos, retain=retain, expiry_s=expiry_s, correlation=correlation
        )
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
        ack = BatchAck(asyncio.get_running_loop(), len(messages))
        for topic, payload in messages:
            self._connection.publish(
                topic, payload, qos=qos, retain=retain, expiry_s=expiry_s, ack=ack
            )
        return ack.future

    def close(self) -> None:
        """Disconnect cleanly; publishes not yet acknowledged fail with MqttError."""
        self._connection.close()

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
