"""The adapters one process uses, each opened on first use and closed in reverse order.

:class:`Adapters` looks each setting up in its name map
(:mod:`voxwire.platform.choices`, :mod:`voxwire.platform.brokers`), opens
what a role asks for once, and leaves the closing to one ``AsyncExitStack``:
what was opened last is closed first (the broker before the store it asks).
Each adapter that can be asked whether its server answers is added to
:attr:`Adapters.readiness` under the name of what it reaches (``/readyz``), and
what can tell that it stopped making progress to :attr:`Adapters.liveness`
(``/healthz``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TypeVar

from voxwire.access.control import AccessControl
from voxwire.access.tokens import TokenIssuer, issuer_for
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.liveness import Calls, Liveness
from voxwire.core.readiness import Pingable, Readiness
from voxwire.platform.brokers import BROKERS, BrokerLink
from voxwire.platform.choices import BLOBS, BUSES, SEARCHES, STORES, Index, choose
from voxwire.sessions.pools import PoolCheck
from voxwire.store import Store
from voxwire.workers.stream.checkpoints import Checkpoints

T = TypeVar("T")

CHECK_NAMES = {
    ("store", "sqlite"): "sqlite",
    ("store", "postgres"): "postgres",
    ("checkpoints", "postgres"): "redis",
    ("bus", "kafka"): "kafka",
    ("search", "sqlite"): "sqlite-fts",
    ("search", "opensearch"): "opensearch",
}
"""The readiness check of each adapter, by (adapter, setting value); the memory
bus and in-process checkpoints have none."""


class Adapters:
    """Store, bus, search, blobs, broker, access and the pool check of one
    process; ``settings`` follows what was bound (ports of 0)."""

    def __init__(self, settings: Settings, stack: AsyncExitStack, role: str) -> None:
        self.settings = settings
        self._stack = stack
        self._role = role
        self._store: Store | None = None
        self._bus: Bus | None = None
        self._search: Index | None = None
        self._blobs: BlobStore | None = None
        self._broker: BrokerLink | None = None
        self._access: AccessControl | None = None
        self._tokens: TokenIssuer | None = None
        self._pools: PoolCheck | None = None
        self.readiness = Readiness()
        self.liveness = Liveness()
        self.engine_calls = Calls()
        """The engine calls under way in this process (watched by :attr:`liveness`)."""

    async def enter(self, opened: AbstractAsyncContextManager[T]) -> T:
        """Enter ``opened`` now; it is exited with the rest."""
        return await self._stack.enter_async_context(opened)

    def on_close(self, callback: Callable[[], Awaitable[object]]) -> None:
        self._stack.push_async_callback(callback)

    def bind(self, **bound: int) -> None:
        """Record ports bound here (what clients and the banner should be told)."""
        self.settings = self.settings.with_ports(**bound)

    async def store(self) -> Store:
        if self._store is None:
            kind = choose("store", STORES, self.settings.store)
            self._store = await self.enter(kind.open(self.settings, self._role))
            self._watch("store", self.settings.store, self._store)
        return self._store

    async def checkpoints(self) -> Checkpoints | None:
        """Where live streams keep their checkpoints (None: in the stream worker)."""
        kind = choose("store", STORES, self.settings.store)
        checkpoints = await self.enter(kind.checkpoints(self.settings, self._role))
        self._watch("checkpoints", self.settings.store, checkpoints)
        return checkpoints

    async def bus(self) -> Bus:
        if self._bus is None:
            opener = choose("bus", BUSES, self.settings.bus)
            self._bus = await self.enter(opener(self.settings, self._role))
            self._watch("bus", self.settings.bus, self._bus)
            stuck = getattr(self._bus, "stuck", None)
            if stuck is not None:  # Kafka: consumer threads that stopped going round
                self.liveness.add("consumers", stuck)
        return self._bus

    async def search(self) -> Index:
        if self._search is None:
            opener = choose("search", SEARCHES, self.settings.search)
            self._search = await self.enter(opener(self.settings, self._role))
            self._watch("search", self.settings.search, self._search)
        return self._search

    async def pools(self) -> PoolCheck:
        """Whether a worker serves a model: one cache for the gateway and the bridge."""
        if self._pools is None:
            self._pools = PoolCheck(await self.bus(), self.settings)
        return self._pools

    def _watch(self, adapter: str, name: str, opened: object) -> None:
        check = CHECK_NAMES.get((adapter, name))
        if check is not None and isinstance(opened, Pingable):
            self.readiness.add(check, opened.ping)

    def blobs(self) -> BlobStore:
        if self._blobs is None:
            self._blobs = choose("blob_store", BLOBS, self.settings.blobs.store)(self.settings)
        return self._blobs

    def tokens(self) -> TokenIssuer:
        """Signs and checks browser session tokens (gateway and embedded broker)."""
        if self._tokens is None:
            settings = self.settings
            self._tokens = issuer_for(
                settings.security.token_secret.get_secret_value(), settings.data_dir
            )
        return self._tokens

    async def broker(self) -> BrokerLink:
        """The broker, started here (embedded) or addressed (external)."""
        if self._broker is None:
            kind = choose("broker", BROKERS, self.settings.broker)
            store = await self.store()
            self._broker = await self.enter(kind.attach(self.settings, store, self.tokens))
            self.bind(**self._broker.bound)
        return self._broker

    async def access(self) -> AccessControl:
        """What keeps the broker's access rules in step with keys and sessions."""
        if self._access is None:
            kind = choose("broker", BROKERS, self.settings.broker)
            self._access = await self.enter(kind.access(self.settings))
        return self._access
