"""``voxwire transcribe``: upload a file, follow it live, print the transcript."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from voxwire.cli.common import (
    KeepOriginalOption,
    RedactOption,
    TranslateOption,
    VocabularyOption,
    clock,
    console,
    err_console,
    fail,
    highlight_markup,
    task_of,
    transcript_title,
)
from voxwire_client import AsyncClient, ClientError, Transcript, TranscriptFormat
from voxwire_client.messages import (
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentMessage,
)
from voxwire_client.options import SessionOptions
from voxwire_client.uploads import session_options


def transcribe(
    file: Annotated[
        Path,
        typer.Argument(
            help="audio file: WAV, FLAC, MP3, OGG/Opus, M4A",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    prompt: Annotated[
        list[str] | None, typer.Option("--prompt", "-p", help="a phrase to listen for (repeatable)")
    ] = None,
    language: Annotated[
        str | None, typer.Option(help="a language code such as de, or auto to detect it")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="one of the models the platform serves [its default]")
    ] = None,
    redact: RedactOption = None,
    keep_original_audio: KeepOriginalOption = False,
    vocabulary: VocabularyOption = None,
    translate: TranslateOption = False,
    diarize: Annotated[
        bool, typer.Option("--diarize", help="label every segment with its speaker")
    ] = False,
    channels: Annotated[
        str,
        typer.Option(help="mixed: channels averaged; separate: each channel its own speaker"),
    ] = "mixed",
    channel_labels: Annotated[
        str | None,
        typer.Option(help="with --channels separate: a label per channel, e.g. agent,customer"),
    ] = None,
    url: Annotated[str | None, typer.Option(help="gateway URL [env VOXWIRE_URL]")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key [env VOXWIRE_API_KEY]")] = None,
    mqtt_url: Annotated[str | None, typer.Option(help="broker URL [env VOXWIRE_MQTT_URL]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the transcript as JSON")] = False,
    fmt: Annotated[
        TranscriptFormat | None,
        typer.Option(
            "--format",
            help="print the transcript as json, txt, srt or vtt (subtitles) on stdout; "
            "progress goes to stderr",
        ),
    ] = None,
) -> None:
    """Upload FILE, show progress, print segments and prompt matches as they arrive."""
    as_json = as_json or fmt is TranscriptFormat.JSON
    export = None if fmt is None or fmt is TranscriptFormat.JSON else fmt
    try:
        options = session_options(
            prompt,
            language=language,
            model=model,
            redact=redact,
            keep_original_audio=keep_original_audio,
            diarize=diarize,
            vocabulary=vocabulary or (),
            task=task_of(translate),
            channels=channels,
            channel_labels=None if channel_labels is None else channel_labels.split(","),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        fail(f"{'.'.join(map(str, first['loc']))}: {first['msg']}", hint="see --help")
    try:
        quiet = as_json or export is not None
        result, exported = asyncio.run(
            _run(file, options, url, api_key, mqtt_url, quiet=quiet, fmt=export)
        )
    except ClientError as exc:
        fail(exc.message, exc.hint)
    if exported is not None:
        sys.stdout.write(exported)
        sys.stdout.flush()
    elif as_json:
        console.print_json(
            json.dumps(
                {
                    "sid": result.sid,
                    "text": result.text,
                    "language": result.language,
                    "task": result.task.value,
                    "duration_ms": result.duration_ms,
                    "segments": [s.model_dump() for s in result.segments],
                    "matches": [m.model_dump() for m in result.matches],
                }
            )
        )
    else:
        console.rule(transcript_title(result.language, result.task))
        console.print(result.text)


async def _run(
    file: Path,
    options: SessionOptions,
    url: str | None,
    api_key: str | None,
    mqtt_url: str | None,
    *,
    quiet: bool,
    fmt: TranscriptFormat | None = None,
) -> tuple[Transcript, str | None]:
    """The session's transcript, and its text in ``fmt`` when one is asked for."""
    out = err_console if quiet else console
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    )
    bar = progress.add_task(file.name, total=100)

    def on_event(message: Message) -> None:
        if isinstance(message, ProgressMessage):
            progress.update(
                bar,
                completed=message.percent,
                description=f"{file.name} [dim]{message.status.value}[/]",
            )
        elif isinstance(message, SegmentMessage) and message.type == "final":
            seg = message.segment
            who = f"[bold]{seg.speaker}[/] " if seg.speaker else ""
            out.print(
                f"[cyan]\\[{clock(seg.start_ms)} → {clock(seg.end_ms)}][/] {who}{escape(seg.text)}"
            )
        elif isinstance(message, MatchMessage):
            highlight = highlight_markup(message.highlight)
            out.print(
                f"[magenta]match[/] {message.prompt!r} at {clock(message.start_ms)} "
                f"(score {message.score:.2f}): {highlight}"
            )

    async with AsyncClient(url, api_key, mqtt_url) as client:
        with progress:
            created = await client.upload(file, options=options)
            out.print(
                f"session [bold]{created.sid}[/] (follow it on {created.endpoints.topic_filter})"
            )
            result = await client.follow(created.sid, on_event=on_event)
        exported = None if fmt is None else await client.transcript_as(created.sid, fmt)
        return result, exported
