"""A paho-mqtt subscription to one session, feeding raw payloads to a callback.

Persistent session (stable client id, clean start off, session expiry) and QoS 1,
so the broker keeps what arrives while the connection is down. MQTT 5 first,
MQTT 3.1.1 when the broker does not speak 5. Once the session has ended, the
broker is told to forget it (else it keeps it for the session expiry: an hour,
or for ever on a 3.1.1 broker).
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from voxwire_client.errors import AuthenticationError, ConnectionFailedError
from voxwire_client.topics import session_filter

log = logging.getLogger(__name__)

SESSION_EXPIRY_S = 3600


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int
    transport: str  # "tcp" | "websockets"
    tls: bool
    path: str


def parse_broker_url(url: str) -> BrokerAddress:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    defaults = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ws": 8083, "wss": 8084}
    if scheme not in defaults:
        raise ConnectionFailedError(
            f"unsupported broker URL {url!r}", hint="use mqtt://, mqtts://, ws:// or wss://"
        )
    return BrokerAddress(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or defaults[scheme],
        transport="websockets" if scheme in ("ws", "wss") else "tcp",
        tls=scheme in ("mqtts", "wss"),
        path=parts.path or "/mqtt",
    )


def mqtt_username(api_key: str) -> str:
    """The key's id (``vxk_<id>_<secret>``): brokers that keep their own user
    list (Mosquitto's dynamic security) know each key by it."""
    parts = api_key.split("_", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "vxk" else "apikey"


def stable_client_id(api_key: str, sid: str) -> str:
    """Same key and session -> same client id, so the broker resumes the session."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:10]
    return f"vxc-{digest}-{sid}"[:64]


class SessionSubscription:
    """Follows ``transcription/<sid>/+``; calls back from paho's network thread.

    ``on_connect`` is called after every CONNACK: with None when connected (and
    subscribed), with the error when the broker refused the connection.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        sid: str,
        protocol: MQTTProtocolVersion,
        on_payload: Callable[[bytes], None],
        on_connect: Callable[[Exception | None], None],
        *,
        ca_file: str | None = None,
    ) -> None:
        self._address = parse_broker_url(url)
        self._api_key = api_key
        self._ca_file = ca_file
        self._sid = sid
        self._protocol = protocol
        self._on_payload = on_payload
        self._on_connect = on_connect
        client = self._new_client(clean=False)
        client.reconnect_delay_set(1, 5)
        client.on_connect = self._handle_connect
        client.on_connect_fail = self._handle_connect_fail
        client.on_message = self._handle_message
        self._client = client

    def _new_client(self, *, clean: bool) -> paho.Client:
        address = self._address
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=stable_client_id(self._api_key, self._sid),
            protocol=self._protocol,
            transport=address.transport,  # type: ignore[arg-type]
            clean_session=None if self._protocol == paho.MQTTv5 else clean,
        )
        if address.transport == "websockets":
            client.ws_set_options(path=address.path)
        if address.tls:
            client.tls_set(ca_certs=self._ca_file, cert_reqs=ssl.CERT_REQUIRED)
        client.username_pw_set(mqtt_username(self._api_key), self._api_key)
        return client

    def begin(self) -> None:
        """Start connecting in paho's thread; the outcome arrives through ``on_connect``."""
        props = None
        if self._protocol == paho.MQTTv5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = SESSION_EXPIRY_S
            self._client.connect_async(
                self._address.host,
                self._address.port,
                keepalive=30,
                clean_start=False,
                properties=props,
            )
        else:
            self._client.connect_async(self._address.host, self._address.port, keepalive=30)
        self._client.loop_start()

    def _handle_connect_fail(self, _client: paho.Client, _userdata: Any) -> None:
        self._on_connect(
            ConnectionFailedError(
                f"cannot reach the MQTT broker at {self._address.host}:{self._address.port}",
                hint="is voxwire running? start it with `make run`",
            )
        )

    def _handle_connect(
        self, client: paho.Client, _userdata: Any, _flags: Any, reason: Any, _props: Any
    ) -> None:
        if not reason.is_failure:
            client.subscribe(session_filter(self._sid), qos=1)
            self._on_connect(None)
            return
        value = int(reason.value)
        failure: Exception
        if value in (0x01, 0x84):  # unacceptable protocol version
            failure = ProtocolRefused(str(reason))
        elif value in (0x04, 0x05, 0x86, 0x87, 0x8C):
            failure = AuthenticationError(
                f"the MQTT broker refused the credentials ({reason})",
                status=401,
                code="unauthorized",
                hint="check VOXWIRE_API_KEY or rerun `make run`",
            )
        else:
            failure = ConnectionFailedError(f"MQTT connection refused: {reason}")
        client.disconnect()
        self._on_connect(failure)

    def _handle_message(self, _client: paho.Client, _userdata: Any, msg: paho.MQTTMessage) -> None:
        self._on_payload(bytes(msg.payload))

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> paho.MQTTMessageInfo:
        """Publish on this connection (paho queues while it reconnects)."""
        return self._client.publish(topic, payload, qos=qos)

    def drop_connection(self) -> None:
        """Close the socket abruptly (paho reconnects); used to test recovery."""
        sock = self._client.socket()
        if sock is not None:
            sock.close()

    def close(self, *, end_session: bool = False) -> None:
        """Disconnect. With ``end_session`` (nothing more will come: the session
        ended) the broker drops the MQTT session too: MQTT 5 says so in its
        DISCONNECT; on 3.1.1 a clean connect under the same client id does it (in
        the background: the caller does not wait for it)."""
        if end_session and self._protocol == paho.MQTTv5:
            props = Properties(PacketTypes.DISCONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = 0
            self._client.disconnect(properties=props)
        else:
            self._client.disconnect()
        self._client.loop_stop()
        if end_session and self._protocol != paho.MQTTv5:
            threading.Thread(target=self._clean_connect, daemon=True).start()

    def _clean_connect(self, timeout: float = 5.0) -> None:
        """Connect with a clean session and leave: a 3.1.1 broker discards the old one."""
        client = self._new_client(clean=True)
        connected = threading.Event()
        client.on_connect = lambda *_: connected.set()
        try:
            client.connect(self._address.host, self._address.port, keepalive=10)
            client.loop_start()
            if not connected.wait(timeout):
                log.debug("the broker did not answer; the MQTT session of %s stays", self._sid)
        except OSError as exc:  # best effort: the broker will still work, only hold more
            log.debug("could not end the MQTT session of %s: %s", self._sid, exc)
        finally:
            client.disconnect()
            client.loop_stop()


class ProtocolRefused(ConnectionFailedError):
    """The broker does not speak the protocol version asked for."""

    pass
