"""Store lookups (key -> grant, session -> owner) served from a dict, for access tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from voxwire.access.owners import SessionOwner

T = TypeVar("T")


def lookup(table: dict[str, T]) -> Callable[[str], Awaitable[T | None]]:
    """An async lookup answering from ``table`` (None for anything missing)."""

    async def find(name: str) -> T | None:
        return table.get(name)

    return find


def owners(table: dict[str, str]) -> Callable[[str], Awaitable[SessionOwner | None]]:
    """Session owners from ``sid -> tenant id`` (no key recorded)."""
    return lookup({sid: SessionOwner(tenant) for sid, tenant in table.items()})
