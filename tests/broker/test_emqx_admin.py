"""A revoked key's open connections on EMQX are closed through EMQX's REST API
(voxwire.broker.emqx_admin), by `voxwire keys revoke` with ``broker = "emqx"``.

EMQX cannot run here (it is in none of the reachable registries): an HTTP server
in the test answers as EMQX 5's API does for the two calls used (GET
/api/v5/clients?username=..., DELETE /api/v5/clients/<clientid>), with its basic
authentication by API key and secret.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from voxwire.access.control import NoAccessSync
from voxwire.broker.emqx_admin import EmqxAdmin
from voxwire.core.config import Settings
from voxwire.core.errors import ConfigError, MqttError
from voxwire.platform import build

pytestmark = pytest.mark.timeout(120)

API_KEY, SECRET = "voxwire-ops", "s3cret/with:odd@chars"


class FakeEmqx(ThreadingHTTPServer):
    """Connected clients (clientid -> username) and the requests made."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.clients: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        quoted = SECRET.replace("/", "%2F").replace(":", "%3A").replace("@", "%40")
        return f"http://{API_KEY}:{quoted}@127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeEmqx

    def log_message(self, *_: object) -> None:
        return None

    def _authorized(self) -> bool:
        expected = base64.b64encode(f"{API_KEY}:{SECRET}".encode()).decode()
        if self.headers.get("Authorization") == f"Basic {expected}":
            return True
        self._answer(401, {"code": "BAD_API_KEY_OR_SECRET"})
        return False

    def _answer(self, status: int, body: object | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.server.requests.append(("GET", self.path))
        if not self._authorized():
            return
        assert parts.path == "/api/v5/clients"
        wanted = parse_qs(parts.query).get("username", [None])[0]
        rows = [{"clientid": c, "username": u, "connected": True}
                for c, u in self.server.clients.items() if wanted in (None, u)]  # fmt: skip
        self._answer(200, {"data": rows, "meta": {"page": 1, "limit": 1000, "hasnext": False}})

    def do_DELETE(self) -> None:
        self.server.requests.append(("DELETE", self.path))
        if not self._authorized():
            return
        clientid = unquote(self.path.removeprefix("/api/v5/clients/"))
        if self.server.clients.pop(clientid, None) is None:
            self._answer(404, {"code": "CLIENTID_NOT_FOUND"})
        else:
            self._answer(204)


@pytest.fixture
def emqx() -> Iterator[FakeEmqx]:
    server = FakeEmqx()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_revoking_a_key_closes_exactly_its_connections(emqx: FakeEmqx) -> None:
    emqx.clients.update({"phone": "k1", "web/tab 1": "k1", "other": "k2", "k1": "k3"})
    admin = EmqxAdmin(emqx.url)
    try:
        await admin.remove_key("k1")
        assert emqx.clients == {"other": "k2", "k1": "k3"}
        await admin.remove_key("k1")  # nothing left: no error
        assert not await admin.kick("gone")
    finally:
        await admin.close()
    assert ("DELETE", "/api/v5/clients/web%2Ftab%201") in emqx.requests


async def test_a_wrong_secret_or_no_emqx_says_what_to_do(emqx: FakeEmqx) -> None:
    wrong = EmqxAdmin(emqx.url.replace(API_KEY, "someone"))
    with pytest.raises(MqttError, match="refused the API key") as refused:
        await wrong.remove_key("k1")
    assert "VOXWIRE_EMQX_API_URL" in str(refused.value.hint)
    assert SECRET not in str(refused.value) and "s3cret" not in refused.value.message
    await wrong.close()
    port = emqx.server_address[1]
    emqx.shutdown()
    emqx.server_close()
    gone = EmqxAdmin(f"http://{API_KEY}:x@127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(MqttError, match="cannot be reached"):
        await gone.remove_key("k1")
    await gone.close()
    with pytest.raises(ConfigError, match="emqx_api_url"):
        EmqxAdmin("emqx:18083")


async def test_the_platform_uses_the_api_only_when_it_is_set(
    emqx: FakeEmqx, tmp_path: Path
) -> None:
    common = {"broker": "emqx", "mqtt_url": "mqtt://127.0.0.1:1", "data_dir": tmp_path}
    async with build(Settings(**common, emqx_api_url=emqx.url)) as platform:
        assert isinstance(await platform.adapters.access(), EmqxAdmin)
    async with build(Settings(**common)) as platform:
        assert isinstance(await platform.adapters.access(), NoAccessSync)


def test_keys_revoke_closes_the_keys_connections_on_emqx(emqx: FakeEmqx, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "VOXWIRE_BROKER": "emqx",
        "VOXWIRE_MQTT_URL": "mqtt://127.0.0.1:1",
        "VOXWIRE_EMQX_API_URL": emqx.url,
    }

    def voxwire(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "voxwire.cli", "keys", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=100)

    created = voxwire("create", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key_id = re.findall(r"key id (\w+)", created.stdout)[0]
    emqx.clients.update({"sensor-1": key_id, "sensor-2": "someone-else"})
    revoked = voxwire("revoke", key_id)
    assert revoked.returncode == 0, revoked.stderr
    assert emqx.clients == {"sensor-2": "someone-else"}
