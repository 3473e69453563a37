"""Server settings: defaults, then a TOML file, then ``VOXWIRE_*`` environment.

The file is ``$VOXWIRE_CONFIG`` or ``<user config dir>/voxwire/server.toml``;
each field can be set in the environment as ``VOXWIRE_<FIELD>`` (upper case),
e.g. ``VOXWIRE_HTTP_PORT=9000``.

``mode`` is a preset of the adapter settings (:data:`PRESETS`); any of them
set explicitly wins over the preset::

    mode         bus     store     search      broker
    embedded     memory  sqlite    sqlite      embedded   (one process, nothing to install)
    distributed  kafka   postgres  opensearch  external   (the servers of `make services`)

Refused combinations (:class:`~voxwire.core.errors.ConfigError`, with a hint):

- ``broker=external`` with an ``mqtt_url`` that is not ``mqtt://`` or ``mqtts://``.

A process that runs only some roles has more rules (``voxwire.platform``).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from voxwire.core.errors import ConfigError
from voxwire_client.api import RedactMode

BusName = Literal["memory", "kafka"]
StoreName = Literal["sqlite", "postgres"]
SearchName = Literal["sqlite", "opensearch"]
BrokerName = Literal["embedded", "external"]

PRESETS: dict[str, dict[str, str]] = {
    "embedded": {"bus": "memory", "store": "sqlite", "search": "sqlite", "broker": "embedded"},
    "distributed": {
        "bus": "kafka",
        "store": "postgres",
        "search": "opensearch",
        "broker": "external",
    },
}
"""What each ``mode`` chooses for the adapter settings left unset."""


class Settings(BaseModel):
    """Everything a voxwire process needs to know."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["embedded", "distributed"] = Field(
        default="embedded", description="a preset of bus, store, search and broker (PRESETS)"
    )
    bus: BusName = Field(default="memory", description="job bus: memory (one process) or kafka")
    store: StoreName = Field(
        default="sqlite", description="history and keys: sqlite, or postgres (with Redis)"
    )
    search: SearchName = Field(default="sqlite", description="search index: sqlite or opensearch")
    broker: BrokerName = Field(
        default="embedded",
        description="MQTT broker: embedded (in this process), or external at mqtt_url "
        "(Mosquitto with dynamic security, EMQX)",
    )
    host: str = "127.0.0.1"
    public_host: str | None = Field(
        default=None, description="host name printed for clients (default: host)"
    )
    http_port: int = Field(default=8000, ge=0, le=65535)
    mqtt_port: int = Field(default=1883, ge=0, le=65535)
    ws_port: int = Field(default=8083, ge=0, le=65535)
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("voxwire")))
    engine: Literal["whispercpp", "faster-whisper"] = Field(
        default="faster-whisper",
        description="faster-whisper (CTranslate2 int8) or whispercpp; benchmarks/bench_engines.py "
        "and bench_streams.py compare them",
    )
    model: str = "tiny.en"
    language: str = "en"
    beam_size: int = Field(default=1, ge=1, le=8)
    workers: int = Field(default=1, ge=1, le=32, description="engine instances")
    threads: int = Field(default=2, ge=1, le=64, description="threads per engine instance")
    batch_finals: int = Field(
        default=1,
        ge=1,
        le=32,
        description="live finals of this many sessions at most in one engine call, where the "
        "engine batches (faster-whisper); 1, the default, does not batch: on 2 CPU cores it "
        "made finals later (bench_streams.py)",
    )
    max_upload_mb: float = Field(default=200, gt=0)
    max_audio_s: float = Field(default=4 * 3600, gt=0)
    message_expiry_s: int = Field(default=24 * 3600, ge=1)
    ingest_session_expiry_s: int = Field(
        default=24 * 3600,
        ge=0,
        description="how long the broker keeps the bridge's MQTT session (and queues client "
        "audio for it) while no bridge is connected; a short-lived installation (tests, "
        "benchmarks) sets it low, so that its session does not collect audio after it is gone",
    )
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535, description="a distributed worker serves /metrics here"
    )
    rate_limit_per_s: float = Field(
        default=50.0, gt=0, description="HTTP requests a second per tenant, sustained"
    )
    rate_limit_burst: int = Field(
        default=500,
        ge=1,
        description="HTTP requests at once per tenant (a client makes ~3 per file)",
    )
    redact_tenants: dict[str, RedactMode] = Field(
        default_factory=dict,
        description="tenant name -> the least redaction its sessions get (a TOML table, or "
        "JSON in VOXWIRE_REDACT_TENANTS)",
    )
    token_secret: SecretStr = Field(
        default=SecretStr(""),
        description="signs browser session tokens (hex, 32+ bytes); empty: data_dir/token.secret",
    )
    hook_secret: SecretStr = Field(
        default=SecretStr(""),
        description="bearer secret EMQX sends to /internal/emqx/*; empty: those routes are off",
    )
    redact: RedactMode = Field(
        default=RedactMode.OFF,
        description="personal data in transcripts when a session does not say: off, mask, entity",
    )

    # distributed mode: the servers (see `scripts/services.sh env`)
    mqtt_url: str = Field(
        default="mqtt://127.0.0.1:11883", description="mqtt:// or, with TLS, mqtts://"
    )
    mqtt_ca_file: Path | None = Field(
        default=None, description="CA certificate that signed the broker's (mqtts://)"
    )
    ws_url: str = "ws://127.0.0.1:18083/mqtt"
    mqtt_username: str = "voxwire-service"
    mqtt_password: SecretStr = SecretStr("")
    kafka_bootstrap: str = "127.0.0.1:19092"
    postgres_dsn: SecretStr = SecretStr("postgresql://voxwire@127.0.0.1:15432/voxwire")
    redis_url: SecretStr = SecretStr("redis://127.0.0.1:16379/0")
    opensearch_url: str = "http://127.0.0.1:19200"
    namespace: str = Field(
        default="",
        pattern=r"^[a-z0-9_]{0,32}$",
        description="prefix of Kafka topics/groups and PostgreSQL schema, to share servers",
    )
    blob_store: Literal["local", "s3"] = "local"
    s3_endpoint_url: str = Field(default="", description="empty: AWS; else MinIO, Ceph, ...")
    s3_bucket: str = "voxwire-audio"
    s3_region: str = "us-east-1"
    s3_access_key: SecretStr = SecretStr("")
    s3_secret_key: SecretStr = SecretStr("")
    shared_dir: Path | None = Field(
        default=None, description="audio shared by gateway and workers (default: data_dir)"
    )

    @model_validator(mode="before")
    @classmethod
    def _mode_preset(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        preset = PRESETS.get(str(data.get("mode") or "embedded"), {})
        unset = {name: value for name, value in preset.items() if data.get(name) in (None, "")}
        return {**data, **unset}

    @model_validator(mode="after")
    def _refuse_conflicts(self) -> Settings:
        if self.broker == "external" and urlsplit(self.mqtt_url).scheme not in ("mqtt", "mqtts"):
            raise ConfigError(
                f"mqtt_url {self.mqtt_url!r} must start with mqtt:// or mqtts://",
                hint="set VOXWIRE_MQTT_URL",
            )
        return self

    @property
    def advertised_host(self) -> str:
        return self.public_host or self.host

    @property
    def broker_urls(self) -> tuple[str, str]:
        """(MQTT URL, MQTT-over-WebSocket URL) that clients should use."""
        if self.broker == "external":
            return self.mqtt_url, self.ws_url
        host = self.advertised_host
        return f"mqtt://{host}:{self.mqtt_port}", f"ws://{host}:{self.ws_port}/mqtt"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "voxwire.sqlite3"

    @property
    def search_db_path(self) -> Path:
        """The embedded search index (SQLite FTS5); rebuilt by ``voxwire search reindex``."""
        return self.data_dir / "search.sqlite3"

    @field_validator("redact_tenants", mode="before")
    @classmethod
    def _json_in_the_environment(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f'not a JSON object like {{"acme": "mask"}}: {exc}') from exc
        return value

    def redact_for(self, tenant_name: str, requested: RedactMode | None) -> RedactMode:
        """A session's redaction: what it asked for, else its tenant's, else the
        platform's default; never less than its tenant's (a session cannot turn
        off what its tenant requires)."""
        floor = self.redact_tenants.get(tenant_name)
        mode = requested or floor or self.redact
        if mode is RedactMode.OFF and floor is not None:
            return floor
        return mode

    @property
    def blob_dir(self) -> Path:
        return (self.shared_dir or self.data_dir) / "audio"


def config_file() -> Path:
    explicit = os.environ.get("VOXWIRE_CONFIG")
    if explicit:
        return Path(explicit)
    return Path(platformdirs.user_config_dir("voxwire")) / "server.toml"


def load_settings(path: Path | None = None, **overrides: object) -> Settings:
    """Defaults <- file <- environment <- explicit overrides (e.g. CLI flags)."""
    values: dict[str, object] = {}
    path = path or config_file()
    if path.exists():
        try:
            values.update(tomllib.loads(path.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}", hint="fix or delete the file") from exc
    for name in Settings.model_fields:
        env = os.environ.get(f"VOXWIRE_{name.upper()}")
        if env is not None and env != "":
            values[name] = env
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"invalid setting {field}: {first['msg']}",
            hint=f"check {path} and the VOXWIRE_{field.upper()} environment variable",
        ) from exc
