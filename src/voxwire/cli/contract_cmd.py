"""``voxwire contract``: write the AsyncAPI document and JSON Schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from voxwire.cli import asyncapi as contract_files
from voxwire.cli.common import console


def contract(
    out: Annotated[Path, typer.Option(help="folder to write into")] = Path("client-sdk/contract"),
) -> None:
    """Write the wire contract (AsyncAPI 3.0 + JSON Schemas) generated from the models."""
    for path in contract_files.write(out):
        console.print(f"wrote {path}")
