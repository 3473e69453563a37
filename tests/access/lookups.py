"""Store lookups (key -> tenant, session -> owner) served from a dict, for access tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


def lookup(table: dict[str, str]) -> Callable[[str], Awaitable[str | None]]:
    """An async lookup answering from ``table`` (None for anything missing)."""

    async def find(name: str) -> str | None:
        return table.get(name)

    return find
