"""``voxwire up --distributed``: gateway, worker and bridge as child processes
against the servers of ``make services``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from voxwire.cli.common import console
from voxwire.config import Settings
from voxwire_client.config import ClientConfig, save_config

ROLES = ("bridge", "worker", "gateway")


def serve_distributed(settings: Settings) -> None:
    from voxwire import distributed
    from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

    kafka_init(settings.kafka_bootstrap, DEFAULT_TOPICS)
    _, key = asyncio.run(distributed.create_key(settings, "default", "created by voxwire up"))
    client = ClientConfig(
        url=f"http://{settings.advertised_host}:{settings.http_port}",
        api_key=key.plaintext,
        mqtt_url=settings.mqtt_url,
        ws_url=settings.ws_url,
    )
    path = save_config(client)
    children = [
        subprocess.Popen([sys.executable, "-m", "voxwire.cli", role])  # noqa: S603
        for role in ROLES
    ]
    console.print(
        f"voxwire (distributed): HTTP {client.url} · MQTT {client.mqtt_url} · "
        f"WebSocket {client.ws_url}\nAPI key (shown once): {key.plaintext}\n"
        f"client config: {path}\nCtrl-C to stop"
    )
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
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
