"""Shared test helpers: WER margins, a platform running in a thread, MQTT listeners.

The eval set, WER and free ports are :mod:`evaluation`'s (benchmarks use them too)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from voxwire.core.config import Settings
from voxwire.platform import build
from voxwire_client._mqtt import mqtt_username

SAME_WORDS_MARGIN = 2
"""Word errors two transcripts of one short recording may differ by: a number
written another way ('eighteen thirteen' as '18 13') counts two."""

CAPTURE_WORDS_MARGIN = 4
"""Word errors a stream that a browser captures in real time may have beyond
another reading of the same speech: where the capture's chunks fall moves the
segment edges. The browser's live test read 2 to 5 errors (73 words) in
runs on one machine, against the offline transcript's 2."""


class PlatformThread:
    """The whole platform (every role) on free ports, run by an event loop in a thread."""

    def __init__(self, settings: Settings, model_path: Path | None) -> None:
        self.platform = build(settings, model_path=model_path)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.api_key = ""

    def start(self) -> PlatformThread:
        self._thread.start()
        boot = self.call(self.platform.ensure_key())
        assert boot.key is not None
        self.api_key = boot.key.plaintext
        self.call(self.platform.start(), timeout=120)
        return self

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.call(self.platform.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    @property
    def settings(self) -> Settings:
        return self.platform.settings

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.listen.http_port}"

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://127.0.0.1:{self.settings.listen.mqtt_port}"

    @property
    def mqtt_port(self) -> int:
        return self.settings.listen.mqtt_port

    def new_tenant_key(self, name: str) -> str:
        from voxwire.access.keys import generate_key

        async def go() -> str:
            store = await self.platform.adapters.store()
            tenant = await store.create_tenant(name)
            key = generate_key()
            await store.add_api_key(tenant.id, key, "test")
            return key.plaintext

        return str(self.call(go()))

    def new_device_key(self, device: str) -> str:
        """A device key of the default tenant (``voxwire keys create --device``)."""
        _, key = self.call(self.platform.create_key("default", device, "device"))
        return str(key.plaintext)

    def revoke_key(self, key_id: str) -> None:
        assert self.call(self.platform.revoke_key(key_id))


@dataclass
class Received:
    topic: str
    payload: bytes
    retain: bool


@dataclass
class Listener:
    """An outside paho client (MQTT 3.1.1) that records what a topic filter delivers."""

    port: int
    password: str | None
    username: str | None = ""
    client_id: str = "test-listener"
    messages: list[Received] = field(default_factory=list)
    granted: list[int] = field(default_factory=list)
    connect_rc: int | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self._connected = threading.Event()
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=paho.MQTTv311
        )
        if self.username is not None:
            username = self.username or mqtt_username(self.password or "")
            self.client.username_pw_set(username, self.password)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(self, _c: Any, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        self.connect_rc = int(reason.value)
        self._connected.set()

    def _on_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        with self._lock:
            self.messages.append(Received(msg.topic, msg.payload, bool(msg.retain)))

    def _on_subscribe(self, _c: Any, _u: Any, _mid: int, codes: list[Any], _p: Any) -> None:
        self.granted = [int(c.value) for c in codes]
        self._subscribed.set()

    def connect(self, timeout: float = 10) -> int | None:
        self.client.connect("127.0.0.1", self.port)
        self.client.loop_start()
        self._connected.wait(timeout)
        return self.connect_rc

    def subscribe(self, topic: str, timeout: float = 10) -> list[int]:
        self._subscribed.clear()
        self.client.subscribe(topic, qos=1)
        assert self._subscribed.wait(timeout), "no SUBACK"
        return self.granted

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.messages)

    def wait_for(self, predicate: Any, timeout: float = 120) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.snapshot()
            if predicate(got):
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out; received {len(self.snapshot())} messages")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def iter_json(received: list[Received]) -> Iterator[dict[str, Any]]:
    for r in received:
        yield json.loads(r.payload)
