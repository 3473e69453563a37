"""Counters of what protects the platform and how live streams are served,
in the Prometheus text format.

Every process keeps its own (``prometheus_client``'s default registry). The
gateway serves them on ``GET /metrics`` (embedded mode: all of the platform's);
in distributed mode a worker or a bridge serves its own on ``metrics_port`` when
set (:mod:`voxwire.platform.probes`, beside ``/healthz`` and ``/readyz``).
No label ever carries text, a key or a session id.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

REDACTIONS = Counter(
    "voxwire_redactions", "Personal data taken out of finals, by entity type", ["entity"]
)
RATE_LIMITED = Counter("voxwire_http_rate_limited", "HTTP requests refused with 429")
MQTT_THROTTLED = Counter(
    "voxwire_mqtt_throttled", "Times a user's MQTT connection was read more slowly"
)

STREAM_ENGINE_SECONDS = Counter(
    "voxwire_stream_engine_seconds",
    "Engine time spent on live streams, by kind of work (final, likely_final, partial)",
    ["kind"],
)
STREAM_ENGINE_CALLS = Counter(
    "voxwire_stream_engine_calls", "Engine calls for live streams, by kind of work", ["kind"]
)
STREAM_FINALS = Counter(
    "voxwire_stream_finals",
    "Live finals by how their text came: likely (the likely final decoded at the start of "
    "the pause was reused) or transcribed (decoded once the pause was long enough)",
    ["how"],
)
STREAM_PARTIALS = Counter(
    "voxwire_stream_partials",
    "Live partials by what became of them: transcribed, superseded (a newer one or the final "
    "came first while it waited for an engine), preempted (stopped: a final needed the engine)",
    ["outcome"],
)
LIVE_STREAMS = Gauge("voxwire_live_streams", "Live streams a worker is transcribing now")
STREAM_BAD_FRAMES = Counter(
    "voxwire_stream_bad_frames",
    "Live chunks that did not decode in their stream's codec (replaced by silence), by codec",
    ["codec"],
)
STREAMS_REFUSED = Counter(
    "voxwire_streams_refused", "Live streams refused because the workers were full"
)
