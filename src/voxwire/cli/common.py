"""Helpers shared by the commands: console, error reporting."""

from __future__ import annotations

import html
import re
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from voxwire_client.api import RedactMode
from voxwire_client.messages import Task

console = Console()
err_console = Console(stderr=True)

RedactOption = Annotated[
    RedactMode | None,
    typer.Option(
        help="personal data in the transcript: off, mask (****), entity ([CREDIT_CARD]) "
        "or numbers (entity, and every number of 4+ digits) [the platform's default]",
        case_sensitive=False,
    ),
]
"""``--redact`` of the commands that start a session."""

KeepOriginalOption = Annotated[
    bool,
    typer.Option(
        "--keep-original-audio",
        help="with redaction: keep the audio as recorded too, for the session's owner "
        "(else only the audio with the redacted spans silenced is kept)",
    ),
]
"""``--keep-original-audio`` of the commands that start a session."""

VocabularyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--vocabulary",
        "-w",
        help="a word or name to expect, written as given, e.g. ComfyUI (repeatable)",
    ),
]
"""``--vocabulary`` of the commands that start a session."""

TranslateOption = Annotated[
    bool,
    typer.Option(
        "--translate",
        help="the text in English, translated from the language spoken (a multilingual "
        "model, e.g. base)",
    ),
]
"""``--translate`` of the commands that start a session: task translate."""


def task_of(translate: bool) -> Task:
    """The task ``--translate`` asks for."""
    return Task.TRANSLATE if translate else Task.TRANSCRIBE


def transcript_title(language: str | None, task: Task) -> str:
    """The heading of a transcript printed at the end of a command."""
    if task is Task.TRANSLATE:
        return f"transcript (English, translated from {language or 'the language spoken'})"
    return "transcript"


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    if hint:
        err_console.print(f"[yellow]hint:[/] {hint}")
    raise typer.Exit(code)


def highlight_markup(html_text: str) -> str:
    """The gateway's HTML highlight (``<em>`` around the match) as rich markup."""
    parts = re.split(r"(</?em>)", html_text)
    style = {"<em>": "[bold yellow]", "</em>": "[/]"}
    return "".join(style.get(p) or escape(html.unescape(p)) for p in parts)


def clock(ms: int) -> str:
    seconds = ms / 1000
    return f"{int(seconds // 60):02d}:{seconds % 60:05.2f}"
