"""``voxwire sessions``: list your sessions, delete them."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.table import Table

from voxwire.cli.common import console, fail
from voxwire_client import AsyncClient, ClientError
from voxwire_client.api import SessionInfo

app = typer.Typer(help="List your sessions, or delete them.", no_args_is_help=True)

UrlOption = Annotated[str | None, typer.Option(help="gateway URL [env VOXWIRE_URL]")]
KeyOption = Annotated[str | None, typer.Option(help="API key [env VOXWIRE_API_KEY]")]


@app.command("list")
def list_sessions(
    limit: Annotated[
        int, typer.Option(min=1, max=1000, help="at most this many, newest first")
    ] = 20,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your latest sessions, newest first."""

    async def fetch() -> list[SessionInfo]:
        async with AsyncClient(url, api_key) as client:
            return await client.sessions(limit)

    try:
        sessions = asyncio.run(fetch())
    except ClientError as exc:
        fail(exc.message, exc.hint)
    table = Table("sid", "created", "status", "file")
    for s in sessions:
        table.add_row(s.sid, f"{s.created_at:%Y-%m-%d %H:%M}", s.status.value, s.filename or "")
    console.print(table)


@app.command(short_help="Delete sessions everywhere (cannot be undone).")
def delete(
    sids: Annotated[list[str], typer.Argument(help="the sessions to delete", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask before deleting")] = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Delete SIDS everywhere: their audio, every transcript version, messages,
    search entries and retained MQTT messages; a live stream is ended first.
    Cannot be undone."""
    if not yes and not typer.confirm(f"Delete {len(sids)} session(s) for good?"):
        raise typer.Exit(1)

    async def run() -> list[tuple[str, str | None]]:
        done: list[tuple[str, str | None]] = []
        async with AsyncClient(url, api_key) as client:
            for sid in sids:
                try:
                    await client.delete(sid)
                    done.append((sid, None))
                except ClientError as exc:
                    done.append((sid, exc.message))
        return done

    try:
        results = asyncio.run(run())
    except ClientError as exc:
        fail(exc.message, exc.hint)
    for sid, error in results:
        console.print(f"deleted {sid}" if error is None else f"[red]not deleted {sid}: {error}")
    if any(error is not None for _, error in results):
        raise typer.Exit(1)
