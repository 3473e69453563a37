"""``voxwire gateway|worker|bridge``: the distributed mode's processes, and
``voxwire kafka init``.

SIGTERM or SIGINT stops a process cleanly (:meth:`voxwire.platform.build.Platform.stop`:
the gateway finishes its requests, a worker its jobs, every consumer commits and
leaves its group) and it exits 0; a second signal cuts the stop short."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Annotated, Any

import typer

from voxwire.cli.common import console, fail
from voxwire.core.config import load_settings
from voxwire.core.errors import VoxwireError

log = logging.getLogger(__name__)

kafka_app = typer.Typer(help="Kafka topics for distributed mode.", no_args_is_help=True)


def _run(role: str, **overrides: Any) -> None:
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {role} %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings(mode="distributed", **overrides)
        from voxwire.platform import build

        asyncio.run(_until_signal(build(settings, [role]).run()))
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


async def _until_signal(job: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(job)
    loop = asyncio.get_running_loop()

    def stop(sig: signal.Signals) -> None:
        log.info("%s: stopping", sig.name)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    log.info("stopped")


def gateway(
    http_port: Annotated[int | None, typer.Option(help="HTTP port [default 8000]")] = None,
) -> None:
    """Run the HTTP gateway against Kafka, PostgreSQL and Mosquitto."""
    _run("gateway", http_port=http_port)


def worker(
    workers: Annotated[
        int | None, typer.Option(help="engine instances for files [default: by cores]")
    ] = None,
    model: Annotated[str | None, typer.Option(help="model name or ggml path")] = None,
    serve: Annotated[
        str | None,
        typer.Option(help="the served models this worker runs, with commas [default: all]"),
    ] = None,
) -> None:
    """Run a transcription worker: a pool in Kafka consumer groups for each model it serves."""
    _run("worker", workers=workers, model=model, serve=serve)


def bridge() -> None:
    """Run the MQTT <-> Kafka bridge (results to subscribers, client publishes to Kafka)."""
    _run("bridge")


@kafka_app.command("init")
def kafka_init(
    bootstrap: Annotated[str | None, typer.Option(help="Kafka bootstrap servers")] = None,
    partitions: Annotated[
        int | None,
        typer.Option(min=1, help="partitions of every topic [12; prompt.queries 6]"),
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option(min=1, help="replicas of every topic's partitions [1]")
    ] = None,
) -> None:
    """Create voxwire's Kafka topics (existing ones are left as they are)."""
    from voxwire.bus.topics import DEFAULT_TOPICS, topic_specs, with_audio_retention
    from voxwire.bus.topics import kafka_init as init

    settings = load_settings(mode="distributed")
    each = {"partitions": partitions} if partitions is not None else {}
    try:
        specs = topic_specs(
            {spec.name: each for spec in DEFAULT_TOPICS},
            replication_factor=replication_factor,
            base=with_audio_retention(settings.limits.audio_log_retention_h),
        )
        created = init(
            bootstrap or settings.servers.kafka_bootstrap,
            specs,
            namespace=settings.namespace or None,
        )
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    for name in created:
        console.print(f"created {name}")
    if not created:
        console.print("all topics exist")
