"""What an operator watches, in the Prometheus text format: requests and their
latency (gateway), jobs, queue wait, engine time and real-time factor (worker),
live streams and their finals' latency, relayed messages and their delivery
latency (bridge), Kafka consumer lag (every consumer), errors by code, and the
counters of what protects the platform.

Every process keeps its own (``prometheus_client``'s default registry). The
gateway serves them on ``GET /metrics`` (embedded mode: all of the platform's);
in distributed mode a worker or a bridge serves its own on ``metrics_port`` when
set (:mod:`voxwire.platform.probes`, beside ``/healthz`` and ``/readyz``).
No label ever carries text, a key or a session id.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
    "Live finals by how their text came: early (the likely final ended a sentence and was "
    "sent at once, endpointing policy fast), likely (the likely final decoded at the start of "
    "the pause was reused once the pause was long enough) or transcribed (decoded then)",
    ["how"],
)
STREAM_PARTIALS = Counter(
    "voxwire_stream_partials",
    "Live partials by what became of them: transcribed, superseded (a newer one or the final "
    "came first while it waited for an engine), preempted (stopped: a final needed the engine)",
    ["outcome"],
)
LIVE_STREAMS = Gauge("voxwire_live_streams", "Live streams a worker is transcribing now")
STREAM_LAG = Histogram(
    "voxwire_stream_lag_seconds",
    "How far a live stream's transcription is behind, at each of its progress messages (the "
    "age of its oldest work waiting or being transcribed; the lag_ms clients get)",
    buckets=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
)
STREAM_BAD_FRAMES = Counter(
    "voxwire_stream_bad_frames",
    "Live chunks that did not decode in their stream's codec (replaced by silence), by codec",
    ["codec"],
)
STREAMS_REFUSED = Counter(
    "voxwire_streams_refused", "Live streams refused because the workers were full"
)
WINDOWS_REDONE = Counter(
    "voxwire_engine_windows_redone",
    "Short clips decoded again on Whisper's whole 30 s window: the short window looped",
)
FILE_LOOPS_REDECODED = Counter(
    "voxwire_file_loops_redecoded",
    "File windows whose decode looped, decoded again with temperature fallback",
)

# -- requests and errors (gateway; errors also from workers) -----------------------------

HTTP_REQUESTS = Counter(
    "voxwire_http_requests",
    "HTTP requests answered, by route template, method and status code",
    ["route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "voxwire_http_request_seconds", "Time to answer an HTTP request, by route template", ["route"]
)
ERRORS = Counter(
    "voxwire_errors",
    "Errors reported to clients (HTTP error bodies, error messages of sessions), by code",
    ["code"],
)

# -- file jobs (worker) ------------------------------------------------------------------

JOBS = Counter(
    "voxwire_jobs",
    "File jobs a worker ended, by outcome: done (committed), uncommitted (done, but the "
    "commit was refused: it may run again), handed_back (aborted: the worker stopped; it "
    "runs again elsewhere), retried (the bus refused its messages: it runs again here), "
    "failed",
    ["outcome"],
)
JOBS_IN_FLIGHT = Gauge("voxwire_jobs_in_flight", "File jobs a worker is transcribing now")
JOBS_WAITING = Gauge(
    "voxwire_jobs_waiting",
    "File jobs read ahead by the workers and waiting for an engine, by tenant",
    ["tenant"],
)
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
JOB_QUEUE_WAIT = Histogram(
    "voxwire_job_queue_wait_seconds",
    "Time a file job waited on the bus before a worker took it",
    buckets=_WAIT_BUCKETS,
)
JOB_SECONDS = Histogram(
    "voxwire_job_seconds",
    "Time a worker spent on a file job, from taking it to the bus accepting its last message",
    buckets=_WAIT_BUCKETS,
)
REALTIME_FACTOR = Histogram(
    "voxwire_engine_realtime_factor",
    "A file job's time over its audio's duration (below 1: faster than real time)",
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5),
)

# -- results (bridge) --------------------------------------------------------------------

RELAYED = Counter(
    "voxwire_relayed_messages",
    "Result messages the bridge stored and published to the broker, by message type",
    ["type"],
)
DELIVERY_SECONDS = Histogram(
    "voxwire_delivery_latency_seconds",
    "From a result message's server timestamp (produced) to the broker acknowledging its "
    "publish (subscribers can have it)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
FINAL_SECONDS = Histogram(
    "voxwire_final_latency_seconds",
    "Live finals: from the end of the segment's audio to its final message (endpointing, "
    "queue, engine)",
    buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
)
INGESTED = Counter(
    "voxwire_ingested_messages", "Client publishes (live audio, control) the bridge put on the bus"
)
INGEST_FOREIGN = Counter(
    "voxwire_ingest_foreign_messages",
    "Client publishes on the audio topics of sessions this installation does not have, or "
    "the query topics of keys it did not issue (another installation's, on a shared broker): "
    "acknowledged and dropped",
)

# -- Kafka (every consumer) --------------------------------------------------------------

CONSUMER_LAG = Gauge(
    "voxwire_kafka_consumer_lag",
    "Records of a topic's partitions this process consumes that it has not reached yet "
    "(librdkafka's statistics)",
    ["topic", "group"],
)
CONSUMER_RENEWALS = Counter(
    "voxwire_kafka_consumer_renewals",
    "Kafka consumers replaced by a new one: reason rejoin (partitions lost and not back "
    "within rejoin_s) or idle (partitions with records waiting, none fetched for idle_s)",
    ["topic", "reason"],
)

SESSIONS_DELETED = Counter(
    "voxwire_sessions_deleted",
    "Sessions whose deletion finished, by reason (request: its owner asked; retention: older "
    "than retention_days)",
    ["reason"],
)

USAGE_AUDIO_SECONDS = Counter(
    "voxwire_usage_audio_seconds",
    "Audio seconds transcribed, by tenant id and kind (file, live, retranscription): counted "
    "when the store records the usage row, once per session version",
    ["tenant", "kind"],
)
QUOTA_REFUSALS = Counter(
    "voxwire_quota_refusals", "Sessions refused because a quota was used up, by quota", ["quota"]
)

WEBHOOK_DELIVERIES = Counter(
    "voxwire_webhook_deliveries",
    "Webhook delivery attempts by outcome: delivered (a 2xx), retried (failed, tried again "
    "later), expired (not acknowledged within webhook_ttl_h), refused (the host resolves to an "
    "address not allowed)",
    ["outcome"],
)
WEBHOOKS_PENDING = Gauge(
    "voxwire_webhooks_pending",
    "Webhook deliveries waiting for their session to finish or for their next attempt (the "
    "store's count, as the gateway last read it)",
)
