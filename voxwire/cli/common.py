"""Helpers shared by the commands: console, error reporting."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    if hint:
        err_console.print(f"[yellow]hint:[/] {hint}")
    raise typer.Exit(code)
