"""The ``voxwire`` command line."""

from __future__ import annotations

import typer

from voxwire.cli import (
    contract_cmd,
    devices,
    keys,
    models,
    retranscribe,
    roles,
    search,
    sessions,
    stream,
    tenants,
    transcribe,
    up,
)

app = typer.Typer(
    name="voxwire",
    help="Speech to text over MQTT. Start the platform with `voxwire up`, "
    "then `voxwire transcribe FILE`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("up")(up.up)
app.command("transcribe")(transcribe.transcribe)
app.command("stream")(stream.stream)
app.command("retranscribe")(retranscribe.retranscribe)
app.command("contract")(contract_cmd.contract)
app.command("devices")(devices.devices)
app.add_typer(models.app, name="models")
app.add_typer(keys.app, name="keys")
app.add_typer(tenants.app, name="tenants")
app.command("usage")(tenants.usage)
app.add_typer(search.app, name="search")
app.add_typer(sessions.app, name="sessions")
app.command("gateway")(roles.gateway)
app.command("worker")(roles.worker)
app.command("bridge")(roles.bridge)
app.add_typer(roles.kafka_app, name="kafka")


def main() -> None:
    app()
