"""The MQTT broker: the one in this process, or an external one at ``mqtt_url``.

``BROKERS`` maps the ``broker`` setting to a :class:`BrokerKind`:

- ``embedded``: :class:`~voxwire.broker.embedded.EmbeddedBroker` in this process.
  It asks the (SQLite) store about every connection, so nothing needs syncing
  (:class:`~voxwire.access.control.NoAccessSync`); voxwire's own clients sign
  in as the service user with a secret made at start-up.
- ``external``: Mosquitto (or EMQX) at ``mqtt_url``, ``mqtts://`` for TLS;
  keys and sessions are kept in sync with its dynamic-security plugin
  (:class:`~voxwire.broker.dynsec.DynsecAccess`).

- ``emqx``: EMQX at ``mqtt_url``, reached as ``external`` is; EMQX asks the
  gateway's hooks (:mod:`voxwire.gateway.emqx`) at every connection and
  publish, so nothing is kept in sync (no dynamic security); with
  ``emqx_api_url`` a revoked key's open connections are closed through EMQX's
  REST API (:class:`~voxwire.broker.emqx_admin.EmqxAdmin`).

Either way :class:`BrokerLink` says how the relay's publisher and the bridge's
ingest reach it, built by :func:`publisher` and :func:`ingest`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from voxwire.access.control import AccessControl, NoAccessSync
from voxwire.access.rules import SERVICE_USER, PlatformAuthenticator, SessionAuthorizer
from voxwire.access.tokens import TokenIssuer
from voxwire.bridge.ingest import SHARE_GROUP, MqttIngest
from voxwire.broker.dynsec import DynsecAccess
from voxwire.broker.embedded import EmbeddedBroker
from voxwire.broker.emqx_admin import EmqxAdmin
from voxwire.broker.mqtt import MqttConnection
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.platform.choices import instance_name
from voxwire.store import Store


@dataclass(frozen=True, slots=True)
class BrokerLink:
    """How voxwire's own clients reach the broker, and what it bound."""

    host: str
    port: int
    username: str
    password: str
    tls: ssl.SSLContext | None
    relay_client_id: str
    relay_session_expiry_s: int
    relay_max_inflight: int
    ingest_client_id: str
    share_group: str | None
    """None: a plain subscription (a broker without shared subscriptions)."""
    bound: Mapping[str, int]
    """Settings the broker bound here (a port of 0 becomes a free one)."""
    shared: bool = False
    """Whether other installations may use the broker too (then the ingest
    forwards only the audio of this installation's sessions and the queries of its keys)."""
    keepalive_s: int = 30
    """The MQTT keepalive of these clients (their liveness bound is 3 of them)."""


def publisher(link: BrokerLink) -> MqttConnection:
    """The relay's publishing session (results, progress, matches, query results)."""
    return MqttConnection(
        link.host,
        link.port,
        client_id=link.relay_client_id,
        username=link.username,
        password=link.password,
        tls=link.tls,
        session_expiry_s=link.relay_session_expiry_s,
        max_inflight=link.relay_max_inflight,
        keepalive_s=link.keepalive_s,
    )


def eraser_publisher(link: BrokerLink) -> MqttConnection:
    """A gateway's publisher of empty retained payloads (a deleted session's topics):
    a client id of its own per process, so that gateways never take each other's."""
    return MqttConnection(
        link.host,
        link.port,
        client_id=f"{link.relay_client_id}-eraser-{secrets.token_hex(4)}",
        username=link.username,
        password=link.password,
        tls=link.tls,
        session_expiry_s=0,
        keepalive_s=link.keepalive_s,
    )


def ingest(link: BrokerLink, bus: Bus, settings: Settings, store: Store) -> MqttIngest:
    """What clients publish (audio, control, prompt queries) onto the bus; on a
    shared broker, the audio of this installation's sessions (those ``store`` has)
    and the queries of the keys it issued."""

    async def is_ours(sid: str) -> bool:
        return await store.session_owner(sid) is not None

    async def is_our_key(key_id: str) -> bool:
        return await store.key_issued(key_id)

    return MqttIngest(
        bus,
        link.host,
        link.port,
        client_id=link.ingest_client_id,
        username=link.username,
        password=link.password,
        share_group=link.share_group,
        tls=link.tls,
        session_expiry_s=settings.limits.ingest_session_expiry_s,
        is_ours=is_ours if link.shared else None,
        is_our_key=is_our_key if link.shared else None,
        keepalive_s=link.keepalive_s,
    )


# -- embedded ----------------------------------------------------------------------------


def embedded_broker(
    settings: Settings, store: Store, service_secret: str, tokens: TokenIssuer
) -> EmbeddedBroker:
    """The in-process broker with voxwire's access rules."""
    return EmbeddedBroker(
        PlatformAuthenticator(service_secret, store.key_grant, tokens),
        SessionAuthorizer(store.session_owner),
        host=settings.listen.host,
        tcp_port=settings.listen.mqtt_port,
        ws_port=settings.listen.ws_port,
        ws_tls=_ws_tls(settings),
    )


def _ws_tls(settings: Settings) -> tuple[Path, Path] | None:
    cert, key = settings.listen.ws_tls_cert, settings.listen.ws_tls_key
    return None if cert is None or key is None else (cert, key)


@contextlib.asynccontextmanager
async def start_embedded(
    settings: Settings, store: Store, tokens: Callable[[], TokenIssuer]
) -> AsyncIterator[BrokerLink]:
    secret = secrets.token_urlsafe(32)
    broker = embedded_broker(settings, store, secret, tokens())
    await broker.start()
    try:
        yield BrokerLink(
            host=settings.listen.host,
            port=broker.tcp_port,
            username=SERVICE_USER,
            password=secret,
            tls=None,
            relay_client_id=f"voxwire-relay-{secrets.token_hex(3)}",
            relay_session_expiry_s=24 * 3600,
            relay_max_inflight=20,
            ingest_client_id="voxwire-ingest",
            share_group=None,
            bound={"mqtt_port": broker.tcp_port, "ws_port": broker.ws_port or 0},
            keepalive_s=settings.listen.mqtt_keepalive_s,
        )
    finally:
        await broker.stop()


@contextlib.asynccontextmanager
async def no_access_sync(_settings: Settings) -> AsyncIterator[AccessControl]:
    yield NoAccessSync()  # the embedded broker asks the store


# -- external ----------------------------------------------------------------------------


def broker_address(settings: Settings) -> tuple[str, int]:
    parts = urlsplit(settings.servers.mqtt_url)
    tls = parts.scheme == "mqtts"
    return parts.hostname or "127.0.0.1", parts.port or (8883 if tls else 1883)


def broker_tls(settings: Settings) -> ssl.SSLContext | None:
    """TLS for voxwire's own broker connections when ``mqtt_url`` is ``mqtts://``,
    verifying the broker with ``mqtt_ca_file`` (or the system's CAs); the settings
    refuse any other scheme for an external broker."""
    if urlsplit(settings.servers.mqtt_url).scheme != "mqtts":
        return None
    cafile = str(settings.servers.mqtt_ca_file) if settings.servers.mqtt_ca_file else None
    return ssl.create_default_context(cafile=cafile)


@contextlib.asynccontextmanager
async def attach_external(
    settings: Settings, _store: Store, _tokens: Callable[[], TokenIssuer]
) -> AsyncIterator[BrokerLink]:
    host, port = broker_address(settings)
    ns = settings.namespace
    yield BrokerLink(
        host=host,
        port=port,
        username=settings.servers.mqtt_username,
        password=settings.servers.mqtt_password.get_secret_value(),
        tls=broker_tls(settings),
        relay_client_id=instance_name("relay"),
        relay_session_expiry_s=60,
        relay_max_inflight=1000,
        ingest_client_id=settings.servers.ingest_client_id
        or f"voxwire-ingest-{ns + '-' if ns else ''}{socket.gethostname()}",
        share_group=f"{SHARE_GROUP}-{ns}" if ns else SHARE_GROUP,
        bound={},
        shared=True,
        keepalive_s=settings.listen.mqtt_keepalive_s,
    )


@contextlib.asynccontextmanager
async def open_dynsec(settings: Settings) -> AsyncIterator[AccessControl]:
    """The broker's dynamic-security plugin, over one admin connection."""
    host, port = broker_address(settings)
    access = DynsecAccess(
        host,
        port,
        settings.servers.mqtt_username,
        settings.servers.mqtt_password.get_secret_value(),
        tls=broker_tls(settings),
        keepalive_s=settings.listen.mqtt_keepalive_s,
    )
    await asyncio.to_thread(access.connect)
    try:
        yield access
    finally:
        await asyncio.to_thread(access.close)


@contextlib.asynccontextmanager
async def open_emqx_admin(settings: Settings) -> AsyncIterator[AccessControl]:
    """EMQX's REST API when ``emqx_api_url`` is set, else nothing to keep in step."""
    url = settings.servers.emqx_api_url.get_secret_value()
    if not url:
        yield NoAccessSync()
        return
    admin = EmqxAdmin(url)
    try:
        yield admin
    finally:
        await admin.close()


@dataclass(frozen=True, slots=True)
class BrokerKind:
    attach: Callable[
        [Settings, Store, Callable[[], TokenIssuer]], AbstractAsyncContextManager[BrokerLink]
    ]
    """Start (embedded) or address (external) the broker: (settings, store, token issuer)."""
    access: Callable[[Settings], AbstractAsyncContextManager[AccessControl]]
    """What keeps the broker's access rules in step with keys and sessions."""


BROKERS: Mapping[str, BrokerKind] = {
    "embedded": BrokerKind(start_embedded, no_access_sync),
    "external": BrokerKind(attach_external, open_dynsec),
    "emqx": BrokerKind(attach_external, open_emqx_admin),
}
