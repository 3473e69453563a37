"""The name maps: which implementation each adapter setting names, and how to open it.

Each map goes from a setting's value to an opener, as
:func:`voxwire.workers.engines.create_engine` does for ``engine``::

    bus         BUSES       memory | kafka
    store       STORES      sqlite | postgres (Redis keeps the live streams' checkpoints)
    search      SEARCHES    sqlite | opensearch
    blob_store  BLOBS       local  | s3
    broker      BROKERS     embedded | external   (voxwire.platform.brokers)

An opener is an async context manager: what it yields is closed on the way out.
:func:`choose` refuses a name no map knows, with the names it does.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from voxwire.blobs import BlobStore, LocalBlobStore, S3BlobStore
from voxwire.bus import Bus, MemoryBus
from voxwire.core.config import Settings
from voxwire.core.errors import ConfigError
from voxwire.search import SearchIndex
from voxwire.search.reindex import Rebuildable
from voxwire.store import SqliteStore, Store
from voxwire.workers.stream.checkpoints import Checkpoints, RedisCheckpoints

T = TypeVar("T")

Opener = Callable[[Settings, str], AbstractAsyncContextManager[T]]
"""(settings, the name of this process's role, e.g. ``worker``) -> the adapter, open."""


def choose(setting: str, table: Mapping[str, T], name: str) -> T:
    """``table[name]``, or a ConfigError naming the setting and the names it takes."""
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table))
        raise ConfigError(
            f"unknown {setting} {name!r}: voxwire knows {known}",
            hint=f"set {setting} (VOXWIRE_{setting.upper()}) to one of: {known}",
        ) from None


def instance_name(role: str) -> str:
    """A name for this process's clients (Kafka, MQTT): role, host and pid."""
    return f"voxwire-{role}-{socket.gethostname()}-{os.getpid()}"


# -- bus ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_memory_bus(_settings: Settings, _role: str) -> AsyncIterator[Bus]:
    bus = MemoryBus()
    try:
        yield bus
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def open_kafka_bus(settings: Settings, role: str) -> AsyncIterator[Bus]:
    """Kafka at ``kafka_bootstrap``; topics and groups prefixed by the namespace."""
    from voxwire.bus.kafka import KafkaBus
    from voxwire.bus.namespaced import NamespacedBus

    kafka = KafkaBus(settings.servers.kafka_bootstrap, client_id=instance_name(role))
    try:
        yield NamespacedBus(kafka, f"{settings.namespace}.") if settings.namespace else kafka
    finally:
        await kafka.close()


BUSES: Mapping[str, Opener[Bus]] = {"memory": open_memory_bus, "kafka": open_kafka_bus}


# -- store -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_sqlite_store(settings: Settings, _role: str) -> AsyncIterator[Store]:
    store = SqliteStore(settings.db_path)
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def open_postgres_store(settings: Settings, _role: str) -> AsyncIterator[Store]:
    """PostgreSQL at ``postgres_dsn``, its tables in the namespace's schema."""
    from voxwire.store.postgres import PostgresStore

    store = await PostgresStore.open(
        settings.servers.postgres_dsn.get_secret_value(), schema=settings.namespace or None
    )
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def memory_checkpoints(_settings: Settings, _role: str) -> AsyncIterator[Checkpoints | None]:
    yield None  # the stream worker keeps them in memory: they die with the process


@contextlib.asynccontextmanager
async def redis_checkpoints(settings: Settings, _role: str) -> AsyncIterator[Checkpoints | None]:
    """On Redis, so that another worker takes a live stream over where this one stopped."""
    checkpoints = RedisCheckpoints.open(
        settings.servers.redis_url.get_secret_value(), prefix=f"vx{settings.namespace}"
    )
    try:
        yield checkpoints
    finally:
        await checkpoints.close()


@dataclass(frozen=True, slots=True)
class StoreKind:
    """A store and where the live streams' checkpoints go with it."""

    open: Opener[Store]
    checkpoints: Opener[Checkpoints | None]


STORES: Mapping[str, StoreKind] = {
    "sqlite": StoreKind(open_sqlite_store, memory_checkpoints),
    "postgres": StoreKind(open_postgres_store, redis_checkpoints),
}


# -- search ------------------------------------------------------------------------------


class Index(SearchIndex, Rebuildable, Protocol):
    """A search index that ``voxwire search reindex`` can rebuild."""


@contextlib.asynccontextmanager
async def open_sqlite_search(settings: Settings, _role: str) -> AsyncIterator[Index]:
    from voxwire.search.sqlite_fts import SqliteSearchIndex

    index = SqliteSearchIndex(settings.search_db_path)
    try:
        await index.ensure_index()
        yield index
    finally:
        await index.close()


def index_alias(settings: Settings) -> str:
    """The OpenSearch alias of this installation (one per namespace)."""
    base = "voxwire-transcripts"
    return f"{base}-{settings.namespace}" if settings.namespace else base


@contextlib.asynccontextmanager
async def open_opensearch(settings: Settings, _role: str) -> AsyncIterator[Index]:
    """The OpenSearch index of this installation, created when missing."""
    from voxwire.search.opensearch import OpenSearchIndex

    index = OpenSearchIndex.open(settings.servers.opensearch_url, alias=index_alias(settings))
    try:
        await index.ensure_index()
        yield index
    finally:
        await index.close()


SEARCHES: Mapping[str, Opener[Index]] = {
    "sqlite": open_sqlite_search,
    "opensearch": open_opensearch,
}


# -- blobs -------------------------------------------------------------------------------


def local_blobs(settings: Settings) -> BlobStore:
    return LocalBlobStore(settings.blob_dir)


BLOBS: Mapping[str, Callable[[Settings], BlobStore]] = {
    "local": local_blobs,
    "s3": S3BlobStore.from_settings,
}
