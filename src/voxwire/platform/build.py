"""``build(settings) -> Platform``: the one composition root.

A :class:`Platform` runs some roles (``voxwire gateway``) or all of them
(``voxwire up``) on the adapters its settings name. Use it as an async
context manager, or call :meth:`Platform.start` and :meth:`Platform.stop`::

    async with build(settings) as platform:
        await platform.ensure_key()
        await platform.start()
        await platform.wait()

:meth:`Platform.run` does that for one role process: it returns when a
component fails, and stops cleanly when cancelled (SIGTERM, Ctrl-C).

Readiness (``/readyz``): the gateway serves it on its HTTP port; a process
without the gateway serves ``/healthz``, ``/readyz`` and ``/metrics`` on
``metrics_port`` when set (:mod:`voxwire.platform.probes`), from before its
roles start. Besides each dependency, ``roles`` is not ready while the roles
start and once one of their tasks has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import uvicorn

from voxwire.access.keys import KeyRole, NewKey, generate_key
from voxwire.core.config import Settings
from voxwire.core.liveness import LoopWatch
from voxwire.platform.adapters import Adapters
from voxwire.platform.probes import PROBES, serve_probes
from voxwire.platform.roles import (
    GATEWAY,
    ROLES,
    Role,
    check_roles,
    file_engines,
    start_bridge,
    start_gateway,
    start_worker,
)

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """A key created at start-up because none existed (shown once)."""

    key: NewKey | None


LOOP_WATCH = "loop watch"
"""The task that beats on the event loop for ``/healthz`` (:class:`LoopWatch`)."""


def build(
    settings: Settings, roles: Iterable[str] = ROLES, *, model_path: Path | None = None
) -> Platform:
    """The platform for ``roles`` on the adapters ``settings`` name (nothing opened yet);
    ``model_path``: a model file for the engines instead of ``settings.engine.model``."""
    return Platform(settings, check_roles(settings, roles), model_path=model_path)


class Platform:
    """Roles of voxwire in this process; :attr:`settings` has the ports bound."""

    def __init__(
        self, settings: Settings, roles: tuple[Role, ...], *, model_path: Path | None = None
    ) -> None:
        self.roles = roles
        self._stack = AsyncExitStack()
        self._name = roles[0] if len(roles) == 1 else "up"
        self.adapters = Adapters(settings, self._stack, self._name)
        self._model_path = model_path
        self._tasks: list[asyncio.Task[None]] = []
        self._server: uvicorn.Server | None = None
        self._probes: uvicorn.Server | None = None
        self._starting = False
        self.device: str | None = None
        """Where this process's engines run, once started (None: no worker role)."""

    @property
    def settings(self) -> Settings:
        return self.adapters.settings

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- keys ----------------------------------------------------------------------------

    async def create_key(
        self, tenant_name: str, label: str, role: KeyRole = "tenant"
    ) -> tuple[str, NewKey]:
        """A new API key of ``tenant_name`` (created when missing) with ``role``,
        stored hashed and registered with the broker; (tenant id, key)."""
        store = await self.adapters.store()
        access = await self.adapters.access()
        tenant = await store.tenant_by_name(tenant_name) or await store.create_tenant(tenant_name)
        key = generate_key()
        await store.add_api_key(tenant.id, key, label, role)
        await access.add_key(tenant.id, key.key_id, key.plaintext, device=role == "device")
        return tenant.id, key

    async def revoke_key(self, key_id: str) -> bool:
        """Revoke an active key: refused from now on, its MQTT connections closed
        (Mosquitto, EMQX); False when no active key has that id."""
        store = await self.adapters.store()
        access = await self.adapters.access()  # reached before anything changes
        if not await store.revoke_api_key(key_id):
            return False
        await access.remove_key(key_id)
        return True

    async def ensure_key(self) -> Bootstrap:
        """Create a default tenant and key when the store has no active tenant key
        (device keys cannot run the CLI or the web app)."""
        store = await self.adapters.store()
        if any(k.revoked_at is None and k.role == "tenant" for k in await store.list_api_keys()):
            return Bootstrap(key=None)
        _, key = await self.create_key(DEFAULT_TENANT, "created by voxwire up")
        return Bootstrap(key=key)

    # -- running -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the roles; returns once they run and the gateway (if any) listens.
        On failure, what was started is stopped again."""
        self._starting = True
        self.adapters.readiness.add_flag("roles", self._roles_state)
        loop_watch = LoopWatch(self.settings.listen.loop_stall_s)
        self.adapters.liveness.add("event loop", loop_watch)
        try:
            self._tasks.append(asyncio.create_task(loop_watch.run(), name=LOOP_WATCH))
            await self._serve_probes()
            device = None
            if "worker" in self.roles:
                tasks, device = await start_worker(self.adapters, self._model_path)
                self._tasks += tasks
                self.device = device
            if "bridge" in self.roles:
                self._tasks += await start_bridge(self.adapters)
            if "gateway" in self.roles:
                workers = len(file_engines(self.settings)) if "worker" in self.roles else 0
                self._server, tasks = await start_gateway(self.adapters, workers, device)
                self._tasks += tasks
        except BaseException:
            await self.stop()
            raise
        finally:
            self._starting = False

    async def _serve_probes(self) -> None:
        port = self.settings.listen.metrics_port
        if port and "gateway" not in self.roles:
            adapters = self.adapters
            self._probes, task = await serve_probes(
                adapters.readiness, adapters.liveness, self._name, self.settings.listen.host, port
            )
            self._tasks.append(task)

    def _roles_state(self) -> str | None:
        """Why the roles are not ready (None: they are)."""
        if self._starting:
            return "starting"
        stopped = [task.get_name() for task in self._tasks if task.done()]
        return f"stopped: {', '.join(stopped)}" if stopped else None

    async def wait(self) -> None:
        """Run until a component ends or fails (its exception is raised)."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def run(self) -> None:
        """Start, run until a component ends or fails or this is cancelled, stop."""
        try:
            await self.start()
            await self.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Let the gateway finish its requests, cancel the other tasks, close the
        adapters (last opened, first closed); safe to call more than once, and the
        platform can be started again."""
        for server in (self._server, self._probes):
            if server is not None:
                server.should_exit = True
        for task in self._tasks:
            if task.get_name() not in (GATEWAY, PROBES):
                task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self._server = self._probes = None
        await self._stack.aclose()
        self.adapters = Adapters(self.settings, self._stack, self._name)  # nothing open
