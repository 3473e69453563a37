"""Where the client finds the platform: a local file written by ``voxwire up``,
overridden by environment variables.

File: ``<user config dir>/voxwire/client.json`` (``VOXWIRE_CONFIG_DIR`` moves it).
Environment: ``VOXWIRE_URL``, ``VOXWIRE_API_KEY``, ``VOXWIRE_MQTT_URL``,
``VOXWIRE_WS_URL``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import platformdirs

from voxwire_client.errors import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_MQTT_URL = "mqtt://127.0.0.1:1883"
DEFAULT_WS_URL = "ws://127.0.0.1:8083/mqtt"

_ENV = {
    "url": "VOXWIRE_URL",
    "api_key": "VOXWIRE_API_KEY",
    "mqtt_url": "VOXWIRE_MQTT_URL",
    "ws_url": "VOXWIRE_WS_URL",
    "mqtt_ca_file": "VOXWIRE_MQTT_CA_FILE",
}


@dataclass(frozen=True, slots=True)
class ClientConfig:
    url: str = DEFAULT_URL
    api_key: str | None = None
    mqtt_url: str = DEFAULT_MQTT_URL
    ws_url: str = DEFAULT_WS_URL
    mqtt_ca_file: str | None = None
    """The CA certificate that signed the broker's (mqtts:// or wss://); None: the system's."""

    def require_key(self) -> str:
        if not self.api_key:
            raise ConfigurationError(
                "no API key configured",
                hint="start the platform with `make run` (it writes one), or set VOXWIRE_API_KEY",
            )
        return self.api_key

    def __repr__(self) -> str:  # never print the key
        key = "set" if self.api_key else "unset"
        return f"ClientConfig(url={self.url!r}, mqtt_url={self.mqtt_url!r}, api_key={key})"


def config_path() -> Path:
    base = os.environ.get("VOXWIRE_CONFIG_DIR") or platformdirs.user_config_dir("voxwire")
    return Path(base) / "client.json"


def load_config(path: Path | None = None) -> ClientConfig:
    """The file's values, then the environment's on top."""
    path = path or config_path()
    config = ClientConfig()
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigurationError(
                f"cannot read client config {path}: {exc}",
                hint="delete it and run `voxwire up` again",
            ) from exc
        known = {k: str(v) for k, v in data.items() if k in _ENV and v is not None}
        config = replace(config, **known)
    overrides = {field: os.environ[env] for field, env in _ENV.items() if os.environ.get(env)}
    return replace(config, **overrides)


def save_config(config: ClientConfig, path: Path | None = None) -> Path:
    """Write the file readable by its owner only (it holds the API key)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    data = {
        "url": config.url,
        "api_key": config.api_key,
        "mqtt_url": config.mqtt_url,
        "ws_url": config.ws_url,
        "mqtt_ca_file": config.mqtt_ca_file,
    }
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    tmp.replace(path)
    return path
