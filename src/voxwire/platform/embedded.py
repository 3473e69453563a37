"""The embedded platform: broker, bus, workers, relay and gateway in one process.

``EmbeddedPlatform.start()`` returns once everything listens; the bound ports
are in :attr:`EmbeddedPlatform.settings` (a port of 0 binds a free one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from voxwire.access.keys import NewKey, generate_key
from voxwire.access.rules import SERVICE_USER, PlatformAuthenticator, SessionAuthorizer
from voxwire.access.tokens import issuer_for
from voxwire.blobs import LocalBlobStore
from voxwire.bridge.indexer import SegmentIndexer
from voxwire.bridge.ingest import MqttIngest
from voxwire.bridge.queries import QueryService
from voxwire.bridge.relay import ResultRelay
from voxwire.broker.embedded import EmbeddedBroker
from voxwire.broker.mqtt import MqttConnection
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings
from voxwire.core.errors import ConfigError
from voxwire.gateway.app import GatewayContext, create_app
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.store import SqliteStore
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.file_worker import FileWorker
from voxwire.workers.stream_worker import StreamWorker

log = logging.getLogger(__name__)

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """A key created at start-up because none existed (shown once)."""

    key: NewKey | None


class EmbeddedPlatform:
    def __init__(self, settings: Settings, *, model_path: Path | None = None) -> None:
        self.settings = settings
        self._model_path = model_path
        self._tasks: list[asyncio.Task[None]] = []
        self._engines: list[Engine] = []
        self._server: uvicorn.Server | None = None
        self._broker: EmbeddedBroker | None = None
        self._publisher: MqttConnection | None = None
        self.store = SqliteStore(settings.db_path)
        self.bus = MemoryBus()
        self.blobs = LocalBlobStore(settings.blob_dir)
        self.worker: FileWorker | None = None
        self.streams: StreamWorker | None = None
        self.relay: ResultRelay | None = None
        self.search = SqliteSearchIndex(settings.search_db_path)

    async def ensure_key(self) -> Bootstrap:
        """Create a default tenant and key when the store has no active key."""
        if any(k.revoked_at is None for k in await self.store.list_api_keys()):
            return Bootstrap(key=None)
        tenant = await self.store.tenant_by_name(DEFAULT_TENANT) or await self.store.create_tenant(
            DEFAULT_TENANT
        )
        key = generate_key()
        await self.store.add_api_key(tenant.id, key, "created by voxwire up")
        return Bootstrap(key=key)

    def load_engines(self) -> None:
        """The file workers' engine instances, plus one for live streams."""
        model = self._model_path or self.settings.model  # each engine resolves a name
        self._engines = [
            create_engine(self.settings.engine, model) for _ in range(self.settings.workers + 1)
        ]

    async def start(self) -> None:
        settings = self.settings
        if not self._engines:
            await asyncio.to_thread(self.load_engines)
        secret = secrets.token_urlsafe(32)
        tokens = issuer_for(settings.token_secret.get_secret_value(), settings.data_dir)
        self._broker = EmbeddedBroker(
            PlatformAuthenticator(secret, self.store.tenant_id_for_key, tokens),
            SessionAuthorizer(self.store.session_owner),
            host=settings.host,
            tcp_port=settings.mqtt_port,
            ws_port=settings.ws_port,
        )
        await self._broker.start()
        http_socket = _listen(settings.host, settings.http_port)
        self.settings = settings = settings.model_copy(
            update={
                "mqtt_port": self._broker.tcp_port,
                "ws_port": self._broker.ws_port or 0,
                "http_port": http_socket.getsockname()[1],
            }
        )
        self._publisher = MqttConnection(
            settings.host,
            settings.mqtt_port,
            client_id=f"voxwire-relay-{secrets.token_hex(3)}",
            username=SERVICE_USER,
            password=secret,
        )
        await asyncio.to_thread(self._publisher.connect)
        options = EngineOptions(
            language=settings.language, beam_size=settings.beam_size, threads=settings.threads
        )
        self.worker = FileWorker(self.bus, self.blobs, self._engines[1:], options)
        self.streams = StreamWorker(
            self.bus, self._engines[0], options, batch_finals=settings.batch_finals
        )
        ingest = MqttIngest(
            self.bus,
            settings.host,
            settings.mqtt_port,
            client_id="voxwire-ingest",
            username=SERVICE_USER,
            password=secret,
            share_group=None,
        )
        self.relay = ResultRelay(
            self.bus, self.store, self._publisher, expiry_s=settings.message_expiry_s
        )
        await self.search.ensure_index()
        indexer = SegmentIndexer(self.bus, self.store, self.search)
        queries = QueryService(self.bus, self.store, self.search, self._publisher)
        app = create_app(
            GatewayContext(
                settings,
                self.store,
                self.bus,
                self.blobs,
                workers=len(self._engines) - 1,
                search=self.search,
                tokens=tokens,
            )
        )
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", access_log=False, timeout_keep_alive=75
        )
        self._server = uvicorn.Server(config)
        self._tasks = [
            asyncio.create_task(self.worker.run(), name="worker"),
            asyncio.create_task(self.relay.run(), name="relay"),
            asyncio.create_task(indexer.run(), name="indexer"),
            asyncio.create_task(queries.run(), name="queries"),
            asyncio.create_task(self.streams.run(), name="streams"),
            asyncio.create_task(ingest.run(), name="ingest"),
            asyncio.create_task(self._server.serve(sockets=[http_socket]), name="gateway"),
        ]
        gateway = self._tasks[-1]
        while not self._server.started:
            if gateway.done():
                gateway.result()
            await asyncio.sleep(0.02)

    async def wait(self) -> None:
        """Run until a component fails or the platform is stopped."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        for task in self._tasks:
            if task.get_name() != "gateway":
                task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._publisher is not None:
            await asyncio.to_thread(self._publisher.close)
        if self._broker is not None:
            await self._broker.stop()
        for engine in self._engines:
            engine.close()
        await self.bus.close()
        await self.search.close()
        await self.store.close()


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} for HTTP: {exc.strerror}",
            hint="another voxwire may be running; stop it or choose another --http-port",
        ) from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock
