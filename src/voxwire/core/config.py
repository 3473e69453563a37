"""Server settings: defaults, then a TOML file, then ``VOXWIRE_*`` environment.

The file is ``$VOXWIRE_CONFIG`` or ``<user config dir>/voxwire/server.toml``;
each setting can be set in the environment as ``VOXWIRE_<SETTING>`` (upper
case), e.g. ``VOXWIRE_HTTP_PORT=9000``.

Settings are read by their flat names (:data:`FLAT_NAMES`: ``http_port``,
``engine``, ``s3_bucket``, ...) in the file, the environment, CLI flags,
:func:`load_settings` and ``Settings(...)``; in code they are grouped::

    Settings     mode, bus, store, search, broker, data_dir, namespace, and:
    .listen      host, public_host, http_port, mqtt_port, ws_port, metrics_port, drain_s,
                 loop_stall_s, mqtt_keepalive_s,
                 ws_tls_cert, ws_tls_key (the embedded broker's wss:// listener)
    .engine      name (flat: engine), model, language, beam_size, workers, threads,
                 stream_engines, max_streams, file_order, file_nice, batch_finals,
                 word_timestamps, device, compute_type, worker_kind
    .live        stream_context_chars, stream_lead_s, live_window_s
    .pools       models, routes, serve (voxwire.wire.pools)
    .limits      max_upload_mb, max_audio_s, message_expiry_s,
                 ingest_session_expiry_s, rate_limit_per_s, rate_limit_burst,
                 retention_days, sweep_interval_s, audio_log_retention_h,
                 webhook_ttl_h, webhook_timeout_s, webhook_retry_s, webhook_retry_max_s,
                 webhook_interval_s
    .security    token_secret, hook_secret, redact, redact_tenants, redact_names,
                 redact_places,
                 webhook_allow (voxwire.core.webhook_settings)
    .servers     the distributed mode's: mqtt_url, mqtt_ca_file, ws_url,
                 mqtt_username, mqtt_password, kafka_bootstrap, postgres_dsn,
                 redis_url, opensearch_url, emqx_api_url, ingest_client_id
    .blobs       store (flat: blob_store), shared_dir, s3_*

A TOML file may also hold a table per group (``[listen]``, ``[engine]``, ...).

``mode`` is a preset of the adapter settings (:data:`PRESETS`); any of them
set explicitly wins over the preset::

    mode         bus     store     search      broker
    embedded     memory  sqlite    sqlite      embedded   (one process, nothing to install)
    distributed  kafka   postgres  opensearch  external   (the servers of `make services`)

Refused combinations (:class:`~voxwire.core.errors.ConfigError`, with a hint):

- ``broker=external`` (or ``emqx``) with an ``mqtt_url`` not ``mqtt://`` or ``mqtts://``.
- ``ws_tls_cert`` without ``ws_tls_key`` or the other way round, or either file missing.

A process that runs only some roles has more rules (``voxwire.platform``).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
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

from voxwire.core.engine_settings import EngineSettings, LiveSettings, PoolSettings
from voxwire.core.errors import ConfigError
from voxwire.core.webhook_settings import ALLOW_DESCRIPTION, WebhookAllow
from voxwire_client.api import RedactMode

BusName = Literal["memory", "kafka"]
StoreName = Literal["sqlite", "postgres"]
SearchName = Literal["sqlite", "opensearch"]
BrokerName = Literal["embedded", "external", "emqx"]

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

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ListenSettings(BaseModel):
    """Where this process listens, and the host name clients are given."""

    model_config = _FROZEN

    host: str = "127.0.0.1"
    public_host: str | None = Field(
        default=None, description="host name printed for clients (default: host)"
    )
    http_port: int = Field(default=8000, ge=0, le=65535)
    mqtt_port: int = Field(default=1883, ge=0, le=65535)
    ws_port: int = Field(default=8083, ge=0, le=65535)
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="a worker or bridge process serves /healthz, /readyz and /metrics here",
    )
    drain_s: float = Field(default=20.0, ge=0)
    """On SIGTERM: how long requests and file jobs in flight may finish (unfinished jobs are
    handed back); keep it under the termination grace period."""
    loop_stall_s: float = Field(
        default=30.0,
        ge=2,
        description="/healthz turns 503 once the event loop has not run for this long",
    )
    mqtt_keepalive_s: int = Field(
        default=30,
        ge=1,
        le=65535,
        description="the keepalive of this process's own MQTT connections; /healthz turns "
        "503 once one has heard nothing from the broker (not even a keepalive answer) for "
        "3 keepalives",
    )
    ws_tls_cert: Path | None = Field(
        default=None,
        description="PEM certificate (chain) of the embedded broker's WebSocket listener: "
        "browsers then connect with wss://",
    )
    ws_tls_key: Path | None = Field(default=None, description="the PEM private key of ws_tls_cert")

    @property
    def advertised_host(self) -> str:
        return self.public_host or self.host

    @model_validator(mode="after")
    def _both_tls_files(self) -> ListenSettings:
        if (self.ws_tls_cert is None) != (self.ws_tls_key is None):
            raise ConfigError(
                "ws_tls_cert and ws_tls_key go together",
                hint="set both (PEM files) for wss://, or neither for ws://",
            )
        for path in (self.ws_tls_cert, self.ws_tls_key):
            if path is not None and not path.is_file():
                raise ConfigError(
                    f"the TLS file {path} does not exist",
                    hint="set VOXWIRE_WS_TLS_CERT and VOXWIRE_WS_TLS_KEY to readable PEM files",
                )
        return self


class LimitSettings(BaseModel):
    """Sizes, lifetimes and rates a client is held to."""

    model_config = _FROZEN

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
    rate_limit_per_s: float = Field(
        default=50.0, gt=0, description="HTTP requests a second per tenant, sustained"
    )
    rate_limit_burst: int = Field(
        default=500,
        ge=1,
        description="HTTP requests at once per tenant (a client makes ~3 per file)",
    )
    retention_days: float | None = Field(
        default=None,
        ge=0,
        description="delete sessions older than this many days (None or 0: keep them forever)",
    )
    sweep_interval_s: float = Field(
        default=300.0,
        gt=0,
        description="how often each gateway looks for expired sessions and unfinished deletions",
    )
    audio_log_retention_h: float = Field(
        default=24.0,
        gt=0,
        description="how long Kafka keeps streamed audio (transcription.audio) and queries "
        "(prompt.queries), in hours: deleting a session cannot take its audio out of the log",
    )
    webhook_ttl_h: float = Field(
        default=24.0, gt=0, description="a webhook not acknowledged within this many hours expires"
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="how long one webhook attempt may take"
    )
    webhook_retry_s: float = Field(
        default=10.0, gt=0, description="the wait after a webhook's first failed attempt (doubled)"
    )
    webhook_retry_max_s: float = Field(
        default=3600.0, gt=0, description="the longest wait between two webhook attempts"
    )
    webhook_interval_s: float = Field(
        default=2.0, gt=0, description="how often each gateway looks for webhooks due"
    )


_STRENGTH = {RedactMode.OFF: 0, RedactMode.MASK: 1, RedactMode.ENTITY: 1, RedactMode.NUMBERS: 2}
"""How much each redaction hides: mask and entity hide the same data."""


class SecuritySettings(BaseModel):
    """Secrets of the HTTP side, and the redaction of personal data."""

    model_config = _FROZEN

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
        description="personal data in transcripts when a session does not say: off, mask, "
        "entity, numbers",
    )
    redact_tenants: dict[str, RedactMode] = Field(
        default_factory=dict,
        description="tenant name -> the least redaction its sessions get (a TOML table, or "
        "JSON in VOXWIRE_REDACT_TENANTS)",
    )
    redact_names: bool = Field(
        default=False,
        description="redaction finds people's names too (PERSON, a spaCy NER model loaded "
        "once per worker: about 2 s and 30 MB)",
    )
    redact_places: bool = Field(
        default=False,
        description="redaction finds places too (LOCATION: cities, countries, regions, "
        "buildings; the same model as redact_names, run once for both)",
    )
    webhook_allow: WebhookAllow = Field(default=(), description=ALLOW_DESCRIPTION)

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
        off what its tenant requires, nor ask for ``mask`` or ``entity`` when its
        tenant requires ``numbers``)."""
        floor = self.redact_tenants.get(tenant_name)
        mode = requested or floor or self.redact
        if floor is not None and _STRENGTH[mode] < _STRENGTH[floor]:
            return floor
        return mode


class ServerSettings(BaseModel):
    """The distributed mode's servers (see ``scripts/services.sh env``)."""

    model_config = _FROZEN

    mqtt_url: str = "mqtt://127.0.0.1:11883"
    """mqtt:// or, with TLS, mqtts://"""
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
    emqx_api_url: SecretStr = SecretStr("")
    """broker=emqx: its REST API as http(s)://<API key>:<secret>@host:18083, to close a revoked
    key's connections at once (empty: EMQX refuses only new ones)."""
    ingest_client_id: str = ""
    """The bridge's persistent MQTT session: each bridge its own, kept across its restarts
    (empty: ``voxwire-ingest-<namespace>-<host>``, which fits one bridge per host)."""


class BlobSettings(BaseModel):
    """Where uploaded audio is kept: a local folder or an S3-compatible store."""

    model_config = _FROZEN

    store: Literal["local", "s3"] = "local"
    shared_dir: Path | None = Field(
        default=None, description="audio shared by gateway and workers (default: data_dir)"
    )
    s3_endpoint_url: str = Field(default="", description="empty: AWS; else MinIO, Ceph, ...")
    s3_bucket: str = "voxwire-audio"
    s3_region: str = "us-east-1"
    s3_access_key: SecretStr = SecretStr("")
    s3_secret_key: SecretStr = SecretStr("")


GROUPS: Mapping[str, type[BaseModel]] = {
    "listen": ListenSettings,
    "engine": EngineSettings,
    "pools": PoolSettings,
    "live": LiveSettings,
    "limits": LimitSettings,
    "security": SecuritySettings,
    "servers": ServerSettings,
    "blobs": BlobSettings,
}
"""The groups of :class:`Settings`, by their field name."""

_RENAMED = {("engine", "name"): "engine", ("blobs", "store"): "blob_store"}

FLAT_NAMES: Mapping[str, tuple[str, str]] = {
    _RENAMED.get((group, field), field): (group, field)
    for group, model in GROUPS.items()
    for field in model.model_fields
}
"""Flat setting name (``VOXWIRE_<NAME>``, TOML key, keyword) -> (group, field)."""


class Settings(BaseModel):
    """Everything a voxwire process needs to know."""

    model_config = _FROZEN

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
        description="MQTT broker: embedded (in this process), external at mqtt_url "
        "(Mosquitto, its access rules kept by dynamic security), or emqx at mqtt_url (EMQX "
        "asks the gateway's hooks: nothing to keep in sync)",
    )
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("voxwire")))
    namespace: str = Field(
        default="",
        pattern=r"^[a-z0-9_]{0,32}$",
        description="prefix of Kafka topics/groups and PostgreSQL schema, to share servers",
    )
    listen: ListenSettings = ListenSettings()
    engine: EngineSettings = EngineSettings()
    pools: PoolSettings = PoolSettings()
    live: LiveSettings = LiveSettings()
    limits: LimitSettings = LimitSettings()
    security: SecuritySettings = SecuritySettings()
    servers: ServerSettings = ServerSettings()
    blobs: BlobSettings = BlobSettings()

    @model_validator(mode="before")
    @classmethod
    def _flat_names_and_mode_preset(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = _grouped(data)
        preset = PRESETS.get(str(data.get("mode") or "embedded"), {})
        unset = {name: value for name, value in preset.items() if data.get(name) in (None, "")}
        return {**data, **unset}

    @model_validator(mode="after")
    def _refuse_conflicts(self) -> Settings:
        mqtt_url = self.servers.mqtt_url
        if self.broker != "embedded" and urlsplit(mqtt_url).scheme not in ("mqtt", "mqtts"):
            raise ConfigError(
                f"mqtt_url {mqtt_url!r} must start with mqtt:// or mqtts://",
                hint="set VOXWIRE_MQTT_URL",
            )
        served = self.served_models
        for what, names in (("routes", self.pools.routes.values()), ("serve", self.pools.serve)):
            if unknown := sorted(set(names) - set(served)):
                raise ConfigError(
                    f"{what} names {', '.join(unknown)}, which the platform does not serve",
                    hint=f"served: {', '.join(served)}; add models with the models setting",
                )
        return self

    @property
    def served_models(self) -> tuple[str, ...]:
        """Every model the platform serves, the default (the engine's) first."""
        return tuple(dict.fromkeys((self.engine.model, *self.pools.models)))

    @property
    def worker_models(self) -> tuple[str, ...]:
        """The models this worker process runs (``serve``, else every served model)."""
        return self.pools.serve or self.served_models

    @property
    def broker_urls(self) -> tuple[str, str]:
        """(MQTT URL, MQTT-over-WebSocket URL) that clients should use."""
        if self.broker != "embedded":
            return self.servers.mqtt_url, self.servers.ws_url
        host = self.listen.advertised_host
        ws = "ws" if self.listen.ws_tls_cert is None else "wss"
        return f"mqtt://{host}:{self.listen.mqtt_port}", f"{ws}://{host}:{self.listen.ws_port}/mqtt"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "voxwire.sqlite3"

    @property
    def search_db_path(self) -> Path:
        """The embedded search index (SQLite FTS5); rebuilt by ``voxwire search reindex``."""
        return self.data_dir / "search.sqlite3"

    @property
    def blob_dir(self) -> Path:
        return (self.blobs.shared_dir or self.data_dir) / "audio"

    def with_ports(self, **ports: int) -> Settings:
        """These settings with ports bound at start-up (``http_port=...``,
        ``mqtt_port=...``, ``ws_port=...``): a port of 0 becomes the one bound."""
        unknown = set(ports) - {"http_port", "mqtt_port", "ws_port", "metrics_port"}
        if unknown:
            raise ValueError(f"not a port setting: {', '.join(sorted(unknown))}")
        return self.model_copy(update={"listen": self.listen.model_copy(update=ports)})


def _grouped(
    data: Mapping[str, object], base: Mapping[str, object] | None = None
) -> dict[str, object]:
    """``base`` (grouped) with ``data`` laid over it, each flat name moved into
    its group; a group given whole (a table or a model) is merged too. Unknown
    names stay where they are, for the model to refuse."""
    out = dict(base or {})
    for name, value in data.items():
        if name in GROUPS and isinstance(value, Mapping | BaseModel):
            out[name] = {**_fields(out[name]), **_fields(value)} if name in out else value
        elif name in FLAT_NAMES:
            group, field = FLAT_NAMES[name]
            out[group] = {**_fields(out.get(group)), field: value}
        else:
            out[name] = value
    return out


def _fields(group: object) -> dict[str, object]:
    if isinstance(group, BaseModel):
        return group.model_dump(exclude_unset=True)
    if isinstance(group, Mapping):
        return dict(group)
    return {}


def _flat_name(loc: tuple[int | str, ...]) -> str:
    """The name a user knows for the setting at a validation error's ``loc``."""
    if len(loc) >= 2 and loc[0] in GROUPS:
        return _RENAMED.get((str(loc[0]), str(loc[1])), str(loc[1]))
    return ".".join(str(p) for p in loc)


def config_file() -> Path:
    if explicit := os.environ.get("VOXWIRE_CONFIG"):
        return Path(explicit)
    return Path(platformdirs.user_config_dir("voxwire")) / "server.toml"


def _environment() -> dict[str, str]:
    names = [*(n for n in Settings.model_fields if n not in GROUPS), *FLAT_NAMES]
    found = {name: os.environ.get(f"VOXWIRE_{name.upper()}") for name in names}
    return {name: value for name, value in found.items() if value}


def load_settings(path: Path | None = None, **overrides: object) -> Settings:
    """Defaults <- file <- environment <- explicit overrides (e.g. CLI flags)."""
    values: dict[str, object] = {}
    path = path or config_file()
    if path.exists():
        try:
            values = _grouped(tomllib.loads(path.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}", hint="fix or delete the file") from exc
    values = _grouped(_environment(), values)
    values = _grouped({k: v for k, v in overrides.items() if v is not None}, values)
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _flat_name(first["loc"])
        raise ConfigError(
            f"invalid setting {field}: {first['msg']}",
            hint=f"check {path} and the VOXWIRE_{field.upper()} environment variable",
        ) from exc
