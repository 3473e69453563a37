"""Distributed mode: gateway, worker and bridge as separate processes on real servers.

The same components as the embedded platform, wired to Kafka (bus),
PostgreSQL (store), Redis (hot state), Mosquitto (broker, with its
dynamic-security plugin kept in sync) and a shared audio folder:

    voxwire gateway   HTTP: upload -> audio folder -> job on transcription.jobs
    voxwire worker    transcription.jobs -> engines -> transcription.results
    voxwire bridge    transcription.results -> PostgreSQL + Redis -> Mosquitto,
                      and what clients publish (audio/<sid>/...) -> Kafka
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import uvicorn

from voxwire.access.keys import NewKey, generate_key
from voxwire.blobs import open_blob_store
from voxwire.bridge.indexer import SegmentIndexer
from voxwire.bridge.ingest import SHARE_GROUP, MqttIngest
from voxwire.bridge.queries import QueryService
from voxwire.bridge.relay import ResultRelay
from voxwire.broker.dynsec import DynsecAccess
from voxwire.broker.mqtt import MqttConnection
from voxwire.bus import Bus
from voxwire.bus.kafka import KafkaBus
from voxwire.bus.namespaced import NamespacedBus
from voxwire.core import metrics
from voxwire.core.aio import first_failure
from voxwire.core.config import Settings
from voxwire.core.errors import ConfigError, MqttError
from voxwire.gateway.app import GatewayContext, create_app
from voxwire.search.opensearch import OpenSearchIndex
from voxwire.store.postgres import PostgresStore
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.file_worker import FileWorker
from voxwire.workers.stream_checkpoints import RedisCheckpoints
from voxwire.workers.stream_worker import StreamWorker

log = logging.getLogger(__name__)


def instance_name(role: str) -> str:
    return f"voxwire-{role}-{socket.gethostname()}-{os.getpid()}"


def broker_address(settings: Settings) -> tuple[str, int]:
    parts = urlsplit(settings.mqtt_url)
    tls = parts.scheme == "mqtts"
    return parts.hostname or "127.0.0.1", parts.port or (8883 if tls else 1883)


def broker_tls(settings: Settings) -> ssl.SSLContext | None:
    """TLS for voxwire's own broker connections when ``mqtt_url`` is ``mqtts://``,
    verifying the broker with ``mqtt_ca_file`` (or the system's CAs)."""
    scheme = urlsplit(settings.mqtt_url).scheme
    if scheme not in ("mqtt", "mqtts"):
        raise ConfigError(
            f"mqtt_url {settings.mqtt_url!r} must start with mqtt:// or mqtts://",
            hint="set VOXWIRE_MQTT_URL",
        )
    if scheme == "mqtt":
        return None
    cafile = str(settings.mqtt_ca_file) if settings.mqtt_ca_file else None
    return ssl.create_default_context(cafile=cafile)


@contextlib.asynccontextmanager
async def open_bus(settings: Settings, role: str) -> AsyncIterator[Bus]:
    kafka = KafkaBus(settings.kafka_bootstrap, client_id=instance_name(role))
    try:
        yield NamespacedBus(kafka, f"{settings.namespace}.") if settings.namespace else kafka
    finally:
        await kafka.close()


@contextlib.asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(
        settings.postgres_dsn.get_secret_value(), schema=settings.namespace or None
    )
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def open_access(settings: Settings) -> AsyncIterator[DynsecAccess]:
    host, port = broker_address(settings)
    access = DynsecAccess(
        host,
        port,
        settings.mqtt_username,
        settings.mqtt_password.get_secret_value(),
        tls=broker_tls(settings),
    )
    await asyncio.to_thread(access.connect)
    try:
        yield access
    finally:
        await asyncio.to_thread(access.close)


async def create_key(settings: Settings, tenant_name: str, label: str) -> tuple[str, NewKey]:
    """A new API key, stored hashed and registered with the broker."""
    async with open_store(settings) as store, open_access(settings) as access:
        tenant = await store.tenant_by_name(tenant_name) or await store.create_tenant(tenant_name)
        key = generate_key()
        await store.add_api_key(tenant.id, key, label)
        await access.add_key(tenant.id, key.key_id, key.plaintext)
        return tenant.id, key


async def run_gateway(settings: Settings) -> None:
    async with (
        open_store(settings) as store,
        open_access(settings) as access,
        open_bus(settings, "gateway") as bus,
        open_search(settings) as search,
    ):
        blobs = open_blob_store(settings)
        app = create_app(GatewayContext(settings, store, bus, blobs, 0, search, access))
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.http_port,
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_keep_alive=75,
        )
        sweeping = asyncio.create_task(_sweep_tokens(access))
        try:
            await uvicorn.Server(config).serve()
        finally:
            sweeping.cancel()


async def _sweep_tokens(access: DynsecAccess, every_s: float = 60.0) -> None:
    """Mosquitto does not know when a token expires: delete expired tokens' clients."""
    while True:
        try:
            removed = await access.remove_expired_tokens(time.time())
            if removed:
                log.info("removed %d expired session tokens from the broker", removed)
        except MqttError as exc:
            log.warning("could not sweep expired session tokens: %s", exc)
        await asyncio.sleep(every_s)


async def run_worker(settings: Settings) -> None:
    engines = [create_engine(settings.engine, settings.model) for _ in range(settings.workers + 1)]
    options = EngineOptions(
        language=settings.language, beam_size=settings.beam_size, threads=settings.threads
    )
    checkpoints = RedisCheckpoints.open(
        settings.redis_url.get_secret_value(), prefix=f"vx{settings.namespace}"
    )
    if settings.metrics_port:
        metrics.serve(settings.metrics_port, settings.host)
    async with open_bus(settings, "worker") as bus:
        worker = FileWorker(bus, open_blob_store(settings), engines[1:], options)
        streams = StreamWorker(
            bus, engines[0], options, checkpoints=checkpoints, batch_finals=settings.batch_finals
        )
        try:
            await first_failure(worker.run(), streams.run())
        finally:
            for engine in engines:
                engine.close()
            await checkpoints.close()


async def run_bridge(settings: Settings) -> None:
    host, port = broker_address(settings)
    password = settings.mqtt_password.get_secret_value()
    publisher = MqttConnection(
        host,
        port,
        client_id=instance_name("relay"),
        username=settings.mqtt_username,
        password=password,
        session_expiry_s=60,
        max_inflight=1000,
        tls=broker_tls(settings),
    )
    await asyncio.to_thread(publisher.connect)
    try:
        async with (
            open_store(settings) as store,
            open_bus(settings, "bridge") as bus,
            open_search(settings) as index,
        ):
            relay = ResultRelay(bus, store, publisher, expiry_s=settings.message_expiry_s)
            indexer = SegmentIndexer(bus, store, index)
            queries = QueryService(bus, store, index, publisher)
            ns = settings.namespace
            ingest = MqttIngest(
                bus,
                host,
                port,
                client_id=f"voxwire-ingest-{ns + '-' if ns else ''}{socket.gethostname()}",
                share_group=f"{SHARE_GROUP}-{ns}" if ns else SHARE_GROUP,
                username=settings.mqtt_username,
                password=password,
                tls=broker_tls(settings),
                session_expiry_s=settings.ingest_session_expiry_s,
            )
            await first_failure(relay.run(), ingest.run(), indexer.run(), queries.run())
    finally:
        await asyncio.to_thread(publisher.close)


@contextlib.asynccontextmanager
async def open_search(settings: Settings) -> AsyncIterator[OpenSearchIndex]:
    """The OpenSearch index of this installation, created when missing."""
    index = OpenSearchIndex.open(settings.opensearch_url, alias=index_alias(settings))
    try:
        await index.ensure_index()
        yield index
    finally:
        await index.close()


def index_alias(settings: Settings) -> str:
    base = "voxwire-transcripts"
    return f"{base}-{settings.namespace}" if settings.namespace else base
