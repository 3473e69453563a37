"""A paho-mqtt subscription to one session, feeding raw payloads to a callback.

Persistent session (stable client id, clean start off, session expiry) and QoS 1,
so the broker keeps what arrives while the connection is down. MQTT 5 first,
MQTT 3.1.1 when the broker does not speak 5.
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


def stable_client_id(api_key: str, sid: str) -> str:
    """Same key and session -> same client id, so the broker resumes the session."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:10]
    return f"vxc-{digest}-{sid}"[:64]


class SessionSubscription:
    """Follows ``transcription/<sid>/+`` and calls back from paho's thread."""

    def __init__(
        self,
        url: str,
        api_key: str,
        sid: str,
        on_payload: Callable[[bytes], None],
        on_connected: Callable[[], None],
    ) -> None:
        self._address = parse_broker_url(url)
        self._sid = sid
        self._on_payload = on_payload
        self._on_connected = on_connected
        self._api_key = api_key
        self._ready = threading.Event()
        self._failure: Exception | None = None
        self._client = self._make_client(paho.MQTTv5)

    def _make_client(self, protocol: MQTTProtocolVersion) -> paho.Client:
        address = self._address
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=stable_client_id(self._api_key, self._sid),
            protocol=protocol,
            transport=address.transport,  # type: ignore[arg-type]
            clean_session=None if protocol == paho.MQTTv5 else False,
        )
        if address.transport == "websockets":
            client.ws_set_options(path=address.path)
        if address.tls:
            client.tls_set(cert_reqs=ssl.CERT_REQUIRED)
        client.username_pw_set("apikey", self._api_key)
        client.reconnect_delay_set(1, 5)
        client.on_connect = self._handle_connect
        client.on_message = self._handle_message
        return client

    def start(self, timeout: float = 10.0) -> None:
        """Connect and subscribe; raise when the broker refuses or is unreachable."""
        for protocol in (paho.MQTTv5, paho.MQTTv311):
            if protocol != paho.MQTTv5:
                self._client = self._make_client(protocol)
            self._failure = None
            self._ready.clear()
            self._connect(protocol, timeout)
            if self._failure is None:
                return
            self._client.loop_stop()
            if not isinstance(self._failure, _ProtocolRefused):
                raise self._failure
        raise ConnectionFailedError("the broker refused MQTT 5 and MQTT 3.1.1")

    def _connect(self, protocol: MQTTProtocolVersion, timeout: float) -> None:
        props = None
        if protocol == paho.MQTTv5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = SESSION_EXPIRY_S
        try:
            if protocol == paho.MQTTv5:
                self._client.connect(
                    self._address.host,
                    self._address.port,
                    keepalive=30,
                    clean_start=False,
                    properties=props,
                )
            else:
                self._client.connect(self._address.host, self._address.port, keepalive=30)
        except OSError as exc:
            raise ConnectionFailedError(
                f"cannot reach the MQTT broker at {self._address.host}:{self._address.port}: {exc}",
                hint="is voxwire running? start it with `make run`",
            ) from exc
        self._client.loop_start()
        if not self._ready.wait(timeout):
            self._client.loop_stop()
            raise ConnectionFailedError("the MQTT broker did not answer in time")

    def _handle_connect(
        self, client: paho.Client, _userdata: Any, _flags: Any, reason: Any, _props: Any
    ) -> None:
        if reason.is_failure:
            value = int(reason.value)
            if value in (0x01, 0x84):  # unacceptable protocol version
                self._failure = _ProtocolRefused(str(reason))
            elif value in (0x04, 0x05, 0x86, 0x87, 0x8C):
                self._failure = AuthenticationError(
                    f"the MQTT broker refused the credentials ({reason})",
                    status=401,
                    code="unauthorized",
                    hint="check VOXWIRE_API_KEY or rerun `make run`",
                )
            else:
                self._failure = ConnectionFailedError(f"MQTT connection refused: {reason}")
            client.disconnect()
            self._ready.set()
            return
        client.subscribe(session_filter(self._sid), qos=1)
        self._ready.set()
        self._on_connected()

    def _handle_message(self, _client: paho.Client, _userdata: Any, msg: paho.MQTTMessage) -> None:
        self._on_payload(bytes(msg.payload))

    def drop_connection(self) -> None:
        """Close the socket abruptly (paho reconnects); used to test recovery."""
        sock = self._client.socket()
        if sock is not None:
            sock.close()

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


class _ProtocolRefused(ConnectionFailedError):
    pass
