"""``voxwire up``: run the whole platform embedded, in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.panel import Panel

from voxwire.cli.common import console, fail
from voxwire.cli.installation import installation_name, known_key
from voxwire.cli.models import checkpoint_with_progress, install_with_progress
from voxwire.core.config import Settings, load_settings
from voxwire.core.errors import VoxwireError
from voxwire.models import registry
from voxwire_client.config import ClientConfig, save_config

if TYPE_CHECKING:
    from voxwire.platform import Bootstrap, Platform


def up(
    http_port: Annotated[int | None, typer.Option(help="HTTP gateway port [default 8000]")] = None,
    mqtt_port: Annotated[int | None, typer.Option(help="MQTT TCP port [default 1883]")] = None,
    ws_port: Annotated[
        int | None, typer.Option(help="MQTT over WebSocket port [default 8083]")
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="address to listen on [default 127.0.0.1]")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="model name (see `voxwire models list`: tiny.en, base, ...; installed on first "
            "use) or a path to a ggml file (whisper.cpp) or CTranslate2 folder (faster-whisper)"
        ),
    ] = None,
    models: Annotated[
        str | None,
        typer.Option(help="more models to serve beside --model, with commas: base,base-q5_0"),
    ] = None,
    routes: Annotated[
        str | None,
        typer.Option(
            help="the model of each language for sessions that name none, '*' for the rest: "
            "en=tiny.en,*=base"
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="engine instances for files [default: by cores]")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where sessions and audio are kept")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log more")] = False,
    distributed: Annotated[
        bool,
        typer.Option(
            "--distributed", help="run gateway, worker and bridge against `make services`"
        ),
    ] = False,
) -> None:
    """Start voxwire embedded: MQTT broker, job bus, workers, SQLite store and HTTP gateway."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("voxwire.audit").setLevel(logging.INFO)  # deletions, always
    overrides: dict[str, object] = {
        "http_port": http_port,
        "mqtt_port": mqtt_port,
        "ws_port": ws_port,
        "host": host,
        "model": model,
        "models": models,
        "routes": routes,
        "workers": workers,
        "data_dir": data_dir,
    }
    try:
        settings = load_settings(None, mode="distributed" if distributed else None, **overrides)
        # installed on first use (downloaded, verified, converted), with a progress bar
        model_path = _model(settings.engine.model, settings.engine.name)
        for other in settings.served_models[1:]:
            _model(other, settings.engine.name)
        if distributed:
            from voxwire.cli.up_distributed import serve_distributed

            given = {name: str(value) for name, value in overrides.items() if value is not None}
            serve_distributed(settings, given)
            return
        asyncio.run(_serve(settings, model_path))
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


def _model(name: str, engine: str) -> Path | None:
    """whisper.cpp's model file; for faster-whisper, None once its folder is in the cache."""
    if engine != "whispercpp":
        if name in registry.catalog():
            checkpoint_with_progress(name)
        return None
    if Path(name).exists() or name not in registry.catalog():
        return registry.resolve(name)
    return install_with_progress(name)


async def _serve(settings: Settings, model_path: Path | None) -> None:
    from voxwire.platform import build  # the heavy imports, only when serving

    async with build(settings, model_path=model_path) as platform:
        bootstrap = await platform.ensure_key()
        with console.status("starting voxwire…"):
            await platform.start()
        await _announce(platform, bootstrap)
        await _until_stopped(platform)


async def _announce(platform: Platform, bootstrap: Bootstrap) -> None:
    """Write this installation's entry of the client config (a new key, else one it
    holds that the store accepts) and print where voxwire listens."""
    settings = platform.settings
    mqtt_url, ws_url = settings.broker_urls
    new_key = bootstrap.key.plaintext if bootstrap.key else None
    client = ClientConfig(
        url=f"http://{settings.listen.advertised_host}:{settings.listen.http_port}",
        mqtt_url=mqtt_url,
        ws_url=ws_url,
        api_key=new_key or await known_key(await platform.adapters.store(), settings),
        installation=installation_name(settings),
    )
    path = save_config(client)
    _banner(
        settings,
        client,
        path,
        new_key=bootstrap.key.plaintext if bootstrap.key else None,
        device=platform.device,
    )


async def _until_stopped(platform: Platform) -> None:
    """Run until a component fails, Ctrl-C or SIGTERM; then stop."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    waiter = asyncio.create_task(platform.wait())
    stopper = asyncio.create_task(stopping.wait())
    await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
    console.print("stopping voxwire…")
    await platform.stop()
    if waiter.done() and not waiter.cancelled():
        waiter.result()
    else:
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter


def _banner(
    settings: Settings,
    client: ClientConfig,
    path: Path,
    *,
    new_key: str | None,
    device: str | None = None,
) -> None:
    from voxwire.platform.roles import file_engines

    engine = settings.engine
    files = len(file_engines(settings))
    on = f" on {device}" if device else ""
    lines = [
        f"[bold]web app[/]         {client.url}/app/   (sign in with the API key)",
        f"[bold]HTTP[/]            {client.url}   (API docs: {client.url}/docs)",
        f"[bold]MQTT[/]            {client.mqtt_url}",
        f"[bold]MQTT/WebSocket[/]  {client.ws_url}",
        f"[bold]model[/]           {engine.model} · files on {files} engine instance(s){on}",
        f"[bold]data[/]            {settings.data_dir}",
    ]
    if new_key:
        lines += ["", "[bold green]API key[/] (shown once, stored hashed):", new_key]
    elif client.api_key:
        lines += ["", f"[bold]API key[/]         in {path}"]
    else:
        lines += [
            "",
            "[yellow]no API key in the client config:[/] create one with "
            "`voxwire keys create` and set VOXWIRE_API_KEY",
        ]
    lines += [
        f"[dim]client config written to {path} (the CLI and SDK read it)[/]",
        "",
        "try: .venv/bin/voxwire transcribe ../shared/eval/audio/whisper_jfk.flac "
        '--prompt "ask not"',
        "MQTT: subscribe to transcription/<sid>/+ as user <key id> (the part after vxk_),",
        "      password <key>; stream with `voxwire stream FILE`",
    ]
    console.print(Panel("\n".join(lines), title="voxwire is running", subtitle="Ctrl-C to stop"))
