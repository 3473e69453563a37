"""``voxwire keys``: create, list and revoke API keys (stored hashed).

The keys live in the store the settings name (``store``); with an external
broker they are registered with it too (``broker``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table

from voxwire.cli.common import console, fail
from voxwire.core.config import load_settings
from voxwire.core.errors import VoxwireError

if TYPE_CHECKING:
    from voxwire.platform import Platform

app = typer.Typer(help="Manage API keys. A key is shown once, when created.", no_args_is_help=True)

T = TypeVar("T")


def _with_platform(job: Callable[[Platform], Awaitable[T]]) -> T:
    """Run ``job`` on the platform of the settings (nothing started but what it uses)."""
    from voxwire.platform import build

    async def go() -> T:
        async with build(load_settings()) as platform:
            return await job(platform)

    try:
        return asyncio.run(go())
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


@app.command()
def create(
    tenant: Annotated[str, typer.Option(help="tenant the key acts for")] = "default",
    label: Annotated[str, typer.Option(help="a note to recognise the key by")] = "cli",
) -> None:
    """Create a key and print it (only this once)."""

    async def go(platform: Platform) -> None:
        tenant_id, new = await platform.create_key(tenant, label)
        console.print(f"key id [bold]{new.key_id}[/] for tenant {tenant} ({tenant_id}):")
        console.print(new.plaintext, soft_wrap=True)
        console.print("[dim]store it now: voxwire keeps only its hash[/]")

    _with_platform(go)


@app.command("list")
def list_keys() -> None:
    """List keys (ids and labels; never the keys themselves)."""

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        table = Table("id", "tenant", "label", "created", "revoked")
        for key in await store.list_api_keys():
            table.add_row(
                key.id,
                key.tenant_id,
                key.label,
                f"{key.created_at:%Y-%m-%d %H:%M}",
                f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "",
            )
        console.print(table)

    _with_platform(go)


@app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="the key id shown by `voxwire keys list`")],
) -> None:
    """Revoke a key: requests and MQTT connections with it are refused from now on."""

    async def go(platform: Platform) -> bool:
        store = await platform.adapters.store()
        if not await store.revoke_api_key(key_id):
            return False
        await (await platform.adapters.access()).remove_key(key_id)
        return True

    if not _with_platform(go):
        fail(f"no active key with id {key_id}", hint="see `voxwire keys list`")
    console.print(f"revoked {key_id}")
