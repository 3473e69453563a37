"""``voxwire retranscribe``: transcribe stored sessions again, as a batch.

Made to be called by a scheduler (cron, a Kubernetes CronJob, an orchestrator's
task): it queues one session at a time on the platform's low-priority lane,
waits for its new version with a progress bar (on stderr), prints a line per
session and exits 0 when every session was transcribed again (or skipped), 1
when one failed. With ``--since``, sessions that were transcribed again before
(version 2 and up) are skipped unless ``--again`` is given, so that a nightly
run that is repeated does not do the work twice.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from voxwire.cli.common import TranslateOption, VocabularyOption, err_console, fail, task_of
from voxwire_client import AsyncClient, ClientError, ErrorMessage, ProgressMessage
from voxwire_client.api import SessionInfo
from voxwire_client.errors import ApiError
from voxwire_client.messages import SessionStatus, TranscriptMessage
from voxwire_client.versions import RetranscribeRequest

_LISTED = 1000
"""The most recent sessions ``--since`` looks through (the API's page limit)."""


def retranscribe(
    sids: Annotated[
        list[str] | None, typer.Argument(help="the sessions to transcribe again")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"],
            help="instead of SIDS: every completed session created since then (UTC unless "
            "given), among the latest 1000",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="one of the models the platform serves [its default]")
    ] = None,
    language: Annotated[
        str | None, typer.Option(help="a language code, or auto [the platform's]")
    ] = None,
    vocabulary: VocabularyOption = None,
    translate: TranslateOption = False,
    again: Annotated[
        bool, typer.Option("--again", help="with --since: also sessions transcribed again before")
    ] = False,
    wait: Annotated[
        bool, typer.Option(help="wait for each new version before queueing the next")
    ] = True,
    url: Annotated[str | None, typer.Option(help="gateway URL [env VOXWIRE_URL]")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key [env VOXWIRE_API_KEY]")] = None,
    mqtt_url: Annotated[str | None, typer.Option(help="broker URL [env VOXWIRE_MQTT_URL]")] = None,
) -> None:
    """Transcribe SIDS (or the sessions since a date) again, each as its next version."""
    if bool(sids) == (since is not None):
        fail(
            "give session ids or --since DATE, not both",
            "e.g. voxwire retranscribe --since 2026-01-31",
        )
    chosen = RetranscribeRequest(
        model=model,
        language=language,
        vocabulary=tuple(vocabulary or ()),
        task=task_of(translate),
    )
    try:
        failed = asyncio.run(
            _run(sids or [], since, chosen, again=again, wait=wait, urls=(url, api_key, mqtt_url))
        )
    except ClientError as exc:
        fail(exc.message, exc.hint)
    if failed:
        raise typer.Exit(1)


def due(sessions: list[SessionInfo], since: datetime, *, again: bool) -> list[str]:
    """The sessions of ``sessions`` to transcribe again, oldest first."""
    since = since if since.tzinfo else since.replace(tzinfo=UTC)
    chosen = [
        s
        for s in sessions
        if s.created_at >= since
        and s.status is SessionStatus.COMPLETED
        and (again or s.version == 1)
    ]
    return [s.sid for s in sorted(chosen, key=lambda s: s.created_at)]


async def _run(
    sids: list[str],
    since: datetime | None,
    chosen: RetranscribeRequest,
    *,
    again: bool,
    wait: bool,
    urls: tuple[str | None, str | None, str | None],
) -> int:
    """Queue (and follow) each session; how many failed."""
    failed = 0
    async with AsyncClient(*urls) as client:
        if since is not None:
            sids = due(await client.sessions(_LISTED), since, again=again)
            err_console.print(f"{len(sids)} session(s) to transcribe again")
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        with progress:
            overall = progress.add_task(f"0/{len(sids)} sessions", total=len(sids) or 1)
            for n, sid in enumerate(sids, 1):
                failed += not await _one(client, sid, chosen, progress, wait=wait)
                progress.update(overall, completed=n, description=f"{n}/{len(sids)} sessions")
    return failed


async def _one(
    client: AsyncClient,
    sid: str,
    chosen: RetranscribeRequest,
    progress: Progress,
    *,
    wait: bool,
) -> bool:
    """Transcribe one session again; False when that failed."""
    try:
        accepted = await client.retranscribe(
            sid,
            model=chosen.model,
            language=chosen.language,
            vocabulary=chosen.vocabulary,
            task=chosen.task,
        )
    except ApiError as exc:
        skipped = exc.status in (404, 409)  # no audio, or busy: nothing to do now
        typer.echo(f"{sid}\t{'skipped' if skipped else 'refused'}\t{exc.message}")
        return skipped
    if not wait:
        typer.echo(f"{sid}\tqueued\tversion {accepted.version}")
        return True
    task = progress.add_task(f"{sid} v{accepted.version}", total=100)
    outcome = f"queued\tversion {accepted.version}"
    async for message in client.version_events(accepted):
        if isinstance(message, ProgressMessage):
            progress.update(task, completed=message.percent)
        elif isinstance(message, TranscriptMessage):
            outcome = f"done\tversion {message.version}\t{len(message.segments)} segments"
        elif isinstance(message, ErrorMessage) and message.fatal:
            outcome = f"failed\t{message.code}: {message.message}"
    progress.remove_task(task)
    typer.echo(f"{sid}\t{outcome}")
    return not outcome.startswith("failed")
