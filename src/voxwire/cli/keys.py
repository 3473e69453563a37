"""``voxwire keys``: create, list and revoke API keys (stored hashed)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.table import Table

from voxwire.access.keys import generate_key
from voxwire.cli.common import console, fail
from voxwire.core.config import load_settings
from voxwire.store import SqliteStore, Tenant

app = typer.Typer(help="Manage API keys. A key is shown once, when created.", no_args_is_help=True)


def _store() -> SqliteStore:
    return SqliteStore(load_settings().db_path)


async def _tenant_named(store: SqliteStore, name: str) -> Tenant:
    return await store.tenant_by_name(name) or await store.create_tenant(name)


@app.command()
def create(
    tenant: Annotated[str, typer.Option(help="tenant the key acts for")] = "default",
    label: Annotated[str, typer.Option(help="a note to recognise the key by")] = "cli",
) -> None:
    """Create a key and print it (only this once)."""

    async def go() -> None:
        store = _store()
        owner = await _tenant_named(store, tenant)
        new = generate_key()
        await store.add_api_key(owner.id, new, label)
        await store.close()
        console.print(f"key id [bold]{new.key_id}[/] for tenant {owner.name} ({owner.id}):")
        console.print(new.plaintext, soft_wrap=True)
        console.print("[dim]store it now: voxwire keeps only its hash[/]")

    asyncio.run(go())


@app.command("list")
def list_keys() -> None:
    """List keys (ids and labels; never the keys themselves)."""

    async def go() -> None:
        store = _store()
        table = Table("id", "tenant", "label", "created", "revoked")
        for key in await store.list_api_keys():
            table.add_row(
                key.id,
                key.tenant_id,
                key.label,
                f"{key.created_at:%Y-%m-%d %H:%M}",
                f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "",
            )
        await store.close()
        console.print(table)

    asyncio.run(go())


@app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="the key id shown by `voxwire keys list`")],
) -> None:
    """Revoke a key: requests and MQTT connections with it are refused from now on."""

    async def go() -> bool:
        store = _store()
        done = await store.revoke_api_key(key_id)
        await store.close()
        return done

    if not asyncio.run(go()):
        fail(f"no active key with id {key_id}", hint="see `voxwire keys list`")
    console.print(f"revoked {key_id}")
