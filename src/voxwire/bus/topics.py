"""The Kafka topics of distributed mode, as typed data, and ``kafka_init``.

===========================  ==========  =========  =========  ==============================
topic                        partitions  retention  cleanup    note
===========================  ==========  =========  =========  ==============================
``transcription.jobs``       12          7 d        delete     key = sid, a FileJob
``transcription.rejobs``     12          7 d        delete     key = sid, a re-transcription
``transcription.results``    12          7 d        delete     key = sid, wire messages
``transcription.windows``    12          1 d        delete     key = sid, windows of text
``prompt.queries``           6           1 d [*]_   delete     key = query id
``transcription.audio``      12          1 d [*]_   delete     key = sid, max 1 MiB a record
===========================  ==========  =========  =========  ==============================

.. [*] ``audio_log_retention_h`` (24 by default, :func:`with_audio_retention`): a
   deleted session's streamed audio, and the parts of files uploaded over MQTT, stay
   in the log until it runs out, since Kafka cannot forget one record.

Every record of these topics is keyed by its session (or query), so a session
stays on one partition and in order; partitions bound how many consumers of a
group can share a topic, 12 leaves room to scale workers and bridges out.

``transcription.windows`` (:mod:`voxwire.wire.windows`) uses ``delete``, not
``compact``: compaction keeps only the newest record of each key, and a
session sends many windows under one key (its sid), each of which must be
indexed; compaction would silently drop every window but the last for a
consumer that lags behind. Windows are indexed within seconds and audio is
only useful while a stream is live, hence one day.

Replication factor 1 suits one broker; set 3 (and ``min.insync.replicas`` 2
through ``config``) on a real cluster. Every field can be overridden
(:func:`topic_specs`), and :func:`kafka_init` creates what is missing and leaves
existing topics alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voxwire.core.errors import BusError, ConfigError

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MIB = 1 << 20


class CleanupPolicy(StrEnum):
    DELETE = "delete"
    COMPACT = "compact"
    COMPACT_DELETE = "compact,delete"


class TopicSpec(BaseModel):
    """One topic: what :func:`kafka_init` creates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    partitions: int = Field(ge=1)
    replication_factor: int = Field(default=1, ge=1)
    retention_ms: int | None = Field(
        default=None, ge=-1, description="None: the broker's default; -1: forever"
    )
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    max_message_bytes: int | None = Field(default=None, ge=1024)
    config: dict[str, str] = Field(
        default_factory=dict, description="other topic configs, e.g. min.insync.replicas"
    )

    def kafka_config(self) -> dict[str, str]:
        """The topic configs, in Kafka's names."""
        config = {"cleanup.policy": self.cleanup_policy.value}
        if self.retention_ms is not None:
            config["retention.ms"] = str(self.retention_ms)
        if self.max_message_bytes is not None:
            config["max.message.bytes"] = str(self.max_message_bytes)
        return {**config, **self.config}


DEFAULT_TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(name="transcription.jobs", partitions=12, retention_ms=7 * DAY_MS),
    TopicSpec(name="transcription.rejobs", partitions=12, retention_ms=7 * DAY_MS),
    TopicSpec(name="transcription.results", partitions=12, retention_ms=7 * DAY_MS),
    TopicSpec(name="transcription.windows", partitions=12, retention_ms=DAY_MS),
    TopicSpec(name="prompt.queries", partitions=6, retention_ms=DAY_MS),
    TopicSpec(
        name="transcription.audio", partitions=12, retention_ms=DAY_MS, max_message_bytes=MIB
    ),
)


AUDIO_TOPICS = ("transcription.audio", "prompt.queries")
"""The topics that carry audio: streamed chunks, and parts of files uploaded over MQTT."""


def with_audio_retention(
    hours: float, base: Iterable[TopicSpec] = DEFAULT_TOPICS
) -> tuple[TopicSpec, ...]:
    """``base`` with the retention of :data:`AUDIO_TOPICS` set to ``hours``."""
    ms = max(1, round(hours * HOUR_MS))
    return tuple(
        spec.model_copy(update={"retention_ms": ms}) if spec.name in AUDIO_TOPICS else spec
        for spec in base
    )


def topic_specs(
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    replication_factor: int | None = None,
    base: Iterable[TopicSpec] = DEFAULT_TOPICS,
) -> tuple[TopicSpec, ...]:
    """The topics with ``overrides`` applied: ``{topic name: {field: value}}``,
    e.g. ``{"transcription.jobs": {"partitions": 24}}``; ``replication_factor``
    applies to every topic. Raises ConfigError for unknown topics or bad values.
    """
    specs = {spec.name: spec for spec in base}
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(specs))
    if unknown:
        raise ConfigError(f"overrides for unknown topics: {', '.join(unknown)}")
    result = []
    for name, spec in specs.items():
        fields = dict(overrides.get(name, {}))
        if replication_factor is not None:
            fields.setdefault("replication_factor", replication_factor)
        try:
            result.append(TopicSpec.model_validate({**spec.model_dump(), **fields}))
        except ValidationError as exc:
            raise ConfigError(f"topic {name}: {exc}") from exc
    return tuple(result)


def kafka_init(
    bootstrap: str,
    spec: Iterable[TopicSpec] = DEFAULT_TOPICS,
    *,
    namespace: str | None = None,
    timeout_s: float = 30.0,
    client_id: str = "voxwire-init",
) -> list[str]:
    """Create the topics of ``spec`` that do not exist; return the names created.

    With ``namespace``, every topic is named ``<namespace>.<name>`` (as
    :class:`~voxwire.bus.namespaced.NamespacedBus` names them), so several
    installations or test runs can share one cluster.

    Existing topics are left as they are (logged, with a warning when their
    partition count differs from the spec). Returns once the new topics are
    visible in the cluster's metadata, so producers and consumers can use them
    right away. Blocks: call it through ``asyncio.to_thread`` from async code.
    """
    # Imported here so that the topic spec is usable without confluent-kafka.
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # = confluent_kafka.admin.NewTopic

    specs = list(spec)
    if namespace:
        specs = [_renamed(s, f"{namespace}.{s.name}") for s in specs]
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "logger": logging.getLogger("voxwire.bus.librdkafka"),
    }
    admin = AdminClient(config)
    new = [
        NewTopic(s.name, s.partitions, s.replication_factor, config=s.kafka_config()) for s in specs
    ]
    futures = admin.create_topics(new, request_timeout=timeout_s, operation_timeout=timeout_s)
    created: list[str] = []
    for s in specs:
        try:
            futures[s.name].result(timeout=timeout_s + 5)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                _report_existing(admin, s, timeout_s)
                continue
            raise BusError(
                f"cannot create Kafka topic {s.name} on {bootstrap}: {error or exc}",
                hint="is the broker running? (scripts/services.sh start kafka)",
            ) from exc
        log.info("created Kafka topic %s (%d partitions)", s.name, s.partitions)
        created.append(s.name)
    _wait_visible(admin, [s for s in specs if s.name in created], timeout_s)
    return created


def _renamed(spec: TopicSpec, name: str) -> TopicSpec:
    try:
        return TopicSpec.model_validate({**spec.model_dump(), "name": name})
    except ValidationError as exc:
        raise ConfigError(f"invalid Kafka topic name {name!r}") from exc


def _report_existing(admin: AdminClient, spec: TopicSpec, timeout_s: float) -> None:
    topic = admin.list_topics(spec.name, timeout=timeout_s).topics.get(spec.name)
    partitions = len(topic.partitions) if topic is not None else 0
    if partitions != spec.partitions:
        log.warning(
            "Kafka topic %s exists with %d partitions (spec: %d); left as it is",
            spec.name,
            partitions,
            spec.partitions,
        )
    else:
        log.info("Kafka topic %s exists; left as it is", spec.name)


def _wait_visible(admin: AdminClient, specs: list[TopicSpec], timeout_s: float) -> None:
    """Wait until every partition of ``specs`` has a leader in the metadata."""
    deadline = time.monotonic() + timeout_s
    missing = [s.name for s in specs]
    while missing:
        topics = admin.list_topics(timeout=timeout_s).topics
        expected = {s.name: s.partitions for s in specs}
        missing = [
            name
            for name in missing
            if name not in topics
            or topics[name].error is not None
            or len(topics[name].partitions) < expected[name]
            or any(p.leader < 0 for p in topics[name].partitions.values())
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise BusError(f"Kafka topics not visible after {timeout_s:.0f} s: {missing}")
        time.sleep(0.1)
