"""``voxwire up --distributed``: gateway, worker and bridge as child processes
against the servers of ``make services``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

from voxwire.cli.common import console
from voxwire.cli.installation import client_key, installation_name
from voxwire.core.config import Settings
from voxwire_client.config import ClientConfig, save_config

ROLES = ("bridge", "worker", "gateway")


def serve_distributed(settings: Settings, overrides: dict[str, str]) -> None:
    """Run the roles until one exits or Ctrl-C; ``overrides`` (setting name -> value,
    from the command line) reach them as ``VOXWIRE_*`` variables."""
    from voxwire.bus.topics import kafka_init, with_audio_retention

    kafka_init(
        settings.servers.kafka_bootstrap,
        with_audio_retention(settings.limits.audio_log_retention_h),
        namespace=settings.namespace or None,
    )
    key, new = asyncio.run(_client_key(settings))
    client = ClientConfig(
        url=f"http://{settings.listen.advertised_host}:{settings.listen.http_port}",
        api_key=key,
        mqtt_url=settings.servers.mqtt_url,
        ws_url=settings.servers.ws_url,
        installation=installation_name(settings),
    )
    path = save_config(client)
    env = os.environ | {f"VOXWIRE_{name.upper()}": value for name, value in overrides.items()}
    command = [sys.executable, "-m", "voxwire.cli"]
    children = [
        subprocess.Popen([*command, role], env=env | _own(role, settings))  # noqa: S603
        for role in ROLES
    ]
    console.print(
        f"voxwire (distributed): HTTP {client.url} · MQTT {client.mqtt_url} · "
        f"WebSocket {client.ws_url}\n"
        + (f"API key (shown once): {key}\n" if new else "API key: the one in the client config\n")
        + f"client config: {path} ({client.installation})\nCtrl-C to stop"
    )
    stopping = threading.Event()  # SIGTERM (kill, systemd, docker stop) stops as Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        while not stopping.is_set() and all(child.poll() is None for child in children):
            stopping.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(20)
            except subprocess.TimeoutExpired:
                child.kill()


def _own(role: str, settings: Settings) -> dict[str, str]:
    """A role's own settings: the worker serves its probes on ``metrics_port``, the
    bridge on the next port (one machine: they cannot share it)."""
    port = settings.listen.metrics_port
    if port and role == "bridge":
        return {"VOXWIRE_METRICS_PORT": str(port + 1)}
    return {}


async def _client_key(settings: Settings) -> tuple[str, bool]:
    """The key this installation's client config holds, if the store still accepts
    it, else a new one of the default tenant; (key, whether it is new)."""
    from voxwire.platform import build

    async with build(settings) as platform:
        key, new = await client_key(platform)
    return key, new is not None
