"""Where the client finds the platform: a local file written by ``voxwire up``,
overridden by environment variables.

File: ``<user config dir>/voxwire/client.json`` (``VOXWIRE_CONFIG_DIR`` moves it).
Environment: ``VOXWIRE_URL``, ``VOXWIRE_API_KEY``, ``VOXWIRE_MQTT_URL``,
``VOXWIRE_WS_URL``, ``VOXWIRE_MQTT_CA_FILE``, ``VOXWIRE_INSTALLATION``.

The file keeps one entry per installation (named by where its keys live, e.g.
``sqlite:/home/me/.local/share/voxwire/voxwire.sqlite3`` or
``postgres://127.0.0.1:15432/voxwire``), so that starting one installation does
not erase the key of another on the same machine::

    {"v": 2, "current": "<name>", "installations": {"<name>": {"url": ..., "api_key": ...,
     "mqtt_url": ..., "ws_url": ..., "mqtt_ca_file": ...}}}

``current`` is the installation started last. :func:`load_config` takes the
entry named by ``VOXWIRE_INSTALLATION``; else, when a URL is given (argument or
``VOXWIRE_URL``), the entry of that gateway (the current one first, then the
one saved last); else the current one. A file of the first format (one flat
entry) reads as the installation ``default`` and is rewritten in this format
by the next :func:`save_config`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import platformdirs

from voxwire_client.errors import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_MQTT_URL = "mqtt://127.0.0.1:1883"
DEFAULT_WS_URL = "ws://127.0.0.1:8083/mqtt"
DEFAULT_INSTALLATION = "default"
"""The name of an entry saved without one, and of a first-format file's only entry."""

FORMAT = 2

_ENV = {
    "url": "VOXWIRE_URL",
    "api_key": "VOXWIRE_API_KEY",
    "mqtt_url": "VOXWIRE_MQTT_URL",
    "ws_url": "VOXWIRE_WS_URL",
    "mqtt_ca_file": "VOXWIRE_MQTT_CA_FILE",
}
INSTALLATION_ENV = "VOXWIRE_INSTALLATION"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    url: str = DEFAULT_URL
    api_key: str | None = None
    mqtt_url: str = DEFAULT_MQTT_URL
    ws_url: str = DEFAULT_WS_URL
    mqtt_ca_file: str | None = None
    """The CA certificate that signed the broker's (mqtts:// or wss://); None: the system's."""
    installation: str = DEFAULT_INSTALLATION
    """The file's entry this came from, or goes to (where the key is valid)."""

    def require_key(self) -> str:
        if not self.api_key:
            raise ConfigurationError(
                "no API key configured",
                hint="start the platform with `make run` (it writes one), or set VOXWIRE_API_KEY",
            )
        return self.api_key

    def __repr__(self) -> str:  # never print the key
        key = "set" if self.api_key else "unset"
        return (
            f"ClientConfig(url={self.url!r}, mqtt_url={self.mqtt_url!r}, api_key={key}, "
            f"installation={self.installation!r})"
        )


def config_path() -> Path:
    base = os.environ.get("VOXWIRE_CONFIG_DIR") or platformdirs.user_config_dir("voxwire")
    return Path(base) / "client.json"


def installations(path: Path | None = None) -> tuple[str | None, dict[str, ClientConfig]]:
    """The file's entries by installation name, oldest saved first, and the current
    one's name (None: an empty or missing file); the environment is not applied."""
    path = path or config_path()
    if not path.exists():
        return None, {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(
            f"cannot read client config {path}: {exc}",
            hint="delete it and run `voxwire up` again",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"client config {path} is not a JSON object", hint="delete it and run `voxwire up`"
        )
    if "installations" not in data:  # the first format: one flat entry
        return DEFAULT_INSTALLATION, {DEFAULT_INSTALLATION: _entry(DEFAULT_INSTALLATION, data)}
    entries = data.get("installations")
    if not isinstance(entries, dict):
        raise ConfigurationError(
            f"client config {path}: 'installations' is not an object",
            hint="delete it and run `voxwire up` again",
        )
    found = {
        str(name): _entry(str(name), fields)
        for name, fields in entries.items()
        if isinstance(fields, dict)
    }
    current = data.get("current")
    return (str(current) if current in found else None), found


def _entry(name: str, fields: dict[str, Any]) -> ClientConfig:
    known = {k: str(v) for k, v in fields.items() if k in _ENV and v is not None}
    return replace(ClientConfig(installation=name), **known)


def load_config(
    path: Path | None = None, *, installation: str | None = None, url: str | None = None
) -> ClientConfig:
    """The chosen entry of the file (see the module's docstring), then the
    environment's values on top."""
    path = path or config_path()
    current, entries = installations(path)
    name = installation or os.environ.get(INSTALLATION_ENV) or None
    if name is not None and name not in entries:
        known = ", ".join(sorted(entries)) or "none yet"
        raise ConfigurationError(
            f"no installation {name!r} in client config {path}",
            hint=f"known: {known}; unset {INSTALLATION_ENV} or start that installation",
        )
    if name is None:
        name = _by_url(url or os.environ.get(_ENV["url"]), current, entries) or current
    config = entries[name] if name is not None else ClientConfig()
    overrides = {field: os.environ[env] for field, env in _ENV.items() if os.environ.get(env)}
    return replace(config, **overrides)


def _by_url(url: str | None, current: str | None, entries: dict[str, ClientConfig]) -> str | None:
    """The installation whose gateway is ``url``: the current one if it is, else
    the one saved last."""
    if not url:
        return None
    wanted = url.rstrip("/")
    matching = [name for name, entry in entries.items() if entry.url.rstrip("/") == wanted]
    if current in matching:
        return current
    return matching[-1] if matching else None


def save_config(config: ClientConfig, path: Path | None = None) -> Path:
    """Put ``config`` under its installation's name and make it the current one,
    keeping the other installations' entries (one holding the same key is
    replaced: it was this installation under another name). The file is
    readable by its owner only (it holds API keys)."""
    path = path or config_path()
    try:
        _, entries = installations(path)
    except ConfigurationError:
        entries = {}  # unreadable: it is replaced
    entries = {
        name: entry
        for name, entry in entries.items()
        if name != config.installation and not (config.api_key and entry.api_key == config.api_key)
    }
    entries[config.installation] = config  # last: saved last
    data = {
        "v": FORMAT,
        "current": config.installation,
        "installations": {name: _fields(entry) for name, entry in entries.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    tmp.replace(path)
    return path


def _fields(config: ClientConfig) -> dict[str, str | None]:
    return {
        "url": config.url,
        "api_key": config.api_key,
        "mqtt_url": config.mqtt_url,
        "ws_url": config.ws_url,
        "mqtt_ca_file": config.mqtt_ca_file,
    }
