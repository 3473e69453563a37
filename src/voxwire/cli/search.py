"""``voxwire search``: search your transcripts; rebuild the search index."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from voxwire.cli.common import clock, console, fail, highlight_markup
from voxwire.core.config import Settings, load_settings
from voxwire.core.errors import VoxwireError
from voxwire.search.reindex import Rebuildable, ReindexReport, SessionSource, reindex
from voxwire_client import AsyncClient, ClientError, SearchPage, SearchQuery

app = typer.Typer(
    help="Search your transcripts, or rebuild the search index.", no_args_is_help=True
)


@app.command()
def query(
    text: Annotated[
        str,
        typer.Argument(
            help='words (all required) and "quoted phrases"; numbers as digits or words'
        ),
    ],
    fuzzy: Annotated[
        bool, typer.Option(help="also find words a letter or two away (misrecognised)")
    ] = False,
    session: Annotated[
        list[str] | None, typer.Option("--session", "-s", help="only this session (repeatable)")
    ] = None,
    from_ms: Annotated[
        int | None, typer.Option(help="only segments ending after this point of the audio (ms)")
    ] = None,
    to_ms: Annotated[
        int | None, typer.Option(help="only segments starting before this point (ms)")
    ] = None,
    speaker: Annotated[
        str | None, typer.Option(help="only what this speaker said (S1, S2...: diarized sessions)")
    ] = None,
    size: Annotated[int, typer.Option(help="hits per page (1-100)")] = 10,
    offset: Annotated[int, typer.Option(help="skip this many hits (next page)")] = 0,
    url: Annotated[str | None, typer.Option(help="gateway URL [env VOXWIRE_URL]")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key [env VOXWIRE_API_KEY]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the page as JSON")] = False,
) -> None:
    """Find the segments of your transcripts that say TEXT, best first."""
    try:
        search = SearchQuery(
            q=text,
            fuzzy=fuzzy,
            sids=tuple(session) if session else None,
            start_ms=from_ms,
            end_ms=to_ms,
            speaker=speaker,
            size=size,
            offset=offset,
        )
    except ValidationError as exc:
        fail(f"invalid search: {exc.errors()[0]['msg']}", hint="see `voxwire search query --help`")
    try:
        page = asyncio.run(_search(search, url, api_key))
    except ClientError as exc:
        fail(exc.message, exc.hint)
    if as_json:
        console.print_json(page.model_dump_json())
        return
    _print_page(page)


async def _search(search: SearchQuery, url: str | None, api_key: str | None) -> SearchPage:
    async with AsyncClient(url, api_key) as client:
        return await client.search(search)


def _print_page(page: SearchPage) -> None:
    if not page.hits:
        console.print("no segment says that" + (" (past this page)" if page.offset else ""))
        return
    table = Table("session", "at", "speaker", "text", "score")
    for hit in page.hits:
        span = f"{clock(hit.start_ms)}-{clock(hit.end_ms)}"
        said = highlight_markup(hit.highlight)
        table.add_row(hit.sid, span, hit.speaker or "", said, f"{hit.score:.2f}")
    console.print(table)
    if page.more:
        console.print(f"[dim]more: --offset {page.offset + page.size}[/]")


@app.command("reindex")
def reindex_command(
    distributed: Annotated[
        bool, typer.Option(help="the distributed mode's PostgreSQL and OpenSearch")
    ] = False,
) -> None:
    """Rebuild the search index from the stored transcripts (searches keep
    working on the old index until the new one replaces it)."""
    try:
        settings = load_settings(mode="distributed") if distributed else load_settings()
        report = asyncio.run(_reindex(settings))
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    console.print(f"indexed {report.segments} segments of {report.sessions} sessions")


async def _reindex(settings: Settings) -> ReindexReport:
    with Progress(
        TextColumn("reindexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("reindex", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        async with _sources(settings) as (store, index):
            return await reindex(store, index, advance)


@contextlib.asynccontextmanager
async def _sources(settings: Settings) -> AsyncIterator[tuple[SessionSource, Rebuildable]]:
    """The store and search index the settings name (``store``, ``search``)."""
    from voxwire.platform import build

    async with build(settings) as platform:
        yield await platform.adapters.store(), await platform.adapters.search()
