"""The roles a process runs, each started from the adapters it needs.

- ``worker``: the file worker (uploads) and the stream worker (live audio),
  on ``workers`` engine instances for files and :func:`stream_engines` for
  streams, on the ``device`` setting's device; ``worker_kind`` = ``files`` or
  ``streams`` runs only one of them (and loads only its engines);
- ``bridge``: the relay (results -> store -> broker), the segment indexer,
  prompt queries and the ingest (what clients publish -> bus);
- ``gateway``: the HTTP API on ``host:http_port``.

Stopping (SIGTERM): the process's signal handler stops the platform
(:meth:`voxwire.platform.build.Platform.stop`), so the HTTP servers here leave
signals alone (:class:`HttpServer`); a stopping gateway accepts no new
connection and finishes the requests in flight, and a worker its jobs, for up
to the ``drain_s`` setting.

Each start function returns the tasks of its role once they run (the
gateway's once it listens); what it opened is closed with the adapters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Generator, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal, get_args

import uvicorn

from voxwire.audio.libopus import OpusLibrary
from voxwire.bridge.indexer import SegmentIndexer
from voxwire.bridge.queries import QueryService
from voxwire.bridge.relay import ResultRelay
from voxwire.broker.dynsec import DynsecAccess
from voxwire.core.config import Settings
from voxwire.core.errors import ConfigError, ModelError, MqttError
from voxwire.core.readiness import Flag
from voxwire.gateway.app import GatewayContext, create_app
from voxwire.gateway.sweeper import Sweeper
from voxwire.gateway.webhook_sender import WebhookSender
from voxwire.models import opus
from voxwire.platform.adapters import Adapters
from voxwire.platform.brokers import eraser_publisher, ingest, publisher
from voxwire.sessions.deletion import SessionEraser
from voxwire.sessions.parts import PartUploads
from voxwire.sessions.quotas import QuotaGuard
from voxwire.sessions.streams import StreamService
from voxwire.sessions.uploads import UploadService
from voxwire.text.redaction import find_names
from voxwire.wire.pools import Lane, Pool
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.files.worker import FileWorker
from voxwire.workers.priority import created_at_nice
from voxwire.workers.stream.archive import LiveArchiver
from voxwire.workers.stream.config import LiveTuning
from voxwire.workers.stream.worker import StreamWorker
from voxwire.workers.watched import WatchedEngine

log = logging.getLogger(__name__)

Role = Literal["worker", "bridge", "gateway"]
ROLES: tuple[Role, ...] = get_args(Role)
"""Every role, in the order they start: the gateway last, once there is someone to serve."""

_ONE_PROCESS = (
    ("bus", "memory", "kafka", "the memory bus is a queue inside one process"),
    ("broker", "embedded", "external", "the embedded broker lives inside `voxwire up`"),
    ("store", "sqlite", "postgres", "every process must see the same sessions and keys"),
    ("search", "sqlite", "opensearch", "the indexer and the searches must share one index"),
)


def check_roles(settings: Settings, roles: Iterable[str]) -> tuple[Role, ...]:
    """``roles`` in start order; a ConfigError for an unknown role, or for a process
    running only some roles on an adapter that lives in one process."""
    wanted = set(roles)
    unknown = wanted - set(ROLES)
    if unknown or not wanted:
        raise ConfigError(
            f"unknown role(s) {sorted(unknown)}" if unknown else "no role to run",
            hint=f"roles are {', '.join(ROLES)}",
        )
    chosen = tuple(role for role in ROLES if role in wanted)
    if chosen == ROLES:
        return chosen
    for setting, local, shared, why in _ONE_PROCESS:
        if getattr(settings, setting) == local:
            raise ConfigError(
                f"{setting}={local} needs every role in one process ({why}); "
                f"this process runs only {', '.join(chosen)}",
                hint=f"set VOXWIRE_{setting.upper()}={shared} (or VOXWIRE_MODE=distributed), "
                "or run every role with `voxwire up`",
            )
    return chosen


# -- worker ------------------------------------------------------------------------------


CGROUP_CPU = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU limit: ``max 100000`` (none) or ``200000 100000`` (2 CPUs)."""


def cpu_cores() -> int:
    """The CPUs this process may use: those it may run on, at most its cgroup's
    limit (a container's, e.g. a Kubernetes pod's ``limits.cpu``) rounded up."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        limit = cgroup_cpus(CGROUP_CPU.read_text())
    except OSError:
        limit = None
    return min(cores or 1, limit or cores or 1)


def cgroup_cpus(cpu_max: str) -> int | None:
    """The CPUs a cgroup v2 ``cpu.max`` allows, rounded up; None: no limit."""
    quota, _, period = cpu_max.strip().partition(" ")
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return max(1, -(-int(quota) // int(period)))


def file_engines(settings: Settings) -> list[int]:
    """The engines that run files, as the threads of each: ``workers`` of
    ``threads`` threads; by default (0) as many as the cores hold, of one thread
    for faster-whisper and of up to 4 for whisper.cpp (whose threads speed up a
    file: 1.8x on 2, where faster-whisper's did not; docs/engines.md)."""
    cores = cpu_cores()
    by_engine = 1 if settings.engine.name == "faster-whisper" else min(4, cores)
    threads = settings.engine.threads or by_engine
    return [threads] * (settings.engine.workers or max(1, cores // threads))


def stream_engines(settings: Settings) -> list[int]:
    """The engines that serve live streams, as the threads of each: the
    ``stream_engines`` setting's count, the cores shared among them; or, by
    default, one per core (at most 4) and a wide one with every core (at most
    4) that takes a final when it is the only work, so that a lone stream's
    final is not decoded on one core."""
    cores = cpu_cores()
    count = settings.engine.stream_engines or min(4, cores)
    narrow = max(1, cores // count)
    wide = min(4, cores)
    extra = [wide] if not settings.engine.stream_engines and wide > narrow else []
    return extra + [narrow] * count


def load_engines(settings: Settings, model: str | Path) -> tuple[list[Engine], list[Engine]]:
    """The engines of ``model`` (a name, or a path) for live streams (see
    :func:`stream_engines`) and for files (:func:`file_engines`), on
    the ``device`` setting's device (logged, with why)."""
    on = {"device": settings.engine.device, "compute_type": settings.engine.compute_type}
    kind = settings.engine.worker_kind
    live = stream_engines(settings) if kind != "files" else []
    count = len(live)
    plan = live + (file_engines(settings) if kind != "streams" else [])
    nice = settings.engine.file_nice
    engines: list[Engine] = []
    try:
        for n, each in enumerate(plan):  # the file engines' threads run at a lower priority
            make = partial(create_engine, settings.engine.name, model, threads=each, **on)
            engines.append(make() if n < count else created_at_nice(make, nice))
    except BaseException:
        for engine in engines:
            engine.close()
        raise
    choice = getattr(engines[0], "device", None)
    if choice is not None:
        log.info("%d %s engine(s) on %s (%s)", len(engines), engines[0].name, choice, choice.reason)
    return engines[:count], engines[count:]


def engine_device(engines: list[Engine]) -> str | None:
    """Where the engines run, as /healthz shows it: ``cuda:0 (NVIDIA H200)``, ``cpu``."""
    choice = getattr(engines[0], "device", None) if engines else None
    return None if choice is None else str(choice)


def opus_decoder() -> OpusLibrary | None:
    """The libopus with LACE that decodes Opus streams, when installed (``voxwire
    models install opus-lace``); None, FFmpeg's decoder, otherwise. Says which."""
    try:
        library = opus.library()
    except ModelError as exc:
        log.warning("Opus streams: FFmpeg's decoder, as %s (%s)", exc.message, exc.hint)
        return None
    if library is None:
        log.info(
            "Opus streams: FFmpeg's decoder; `voxwire models install %s` builds libopus "
            "with LACE, which reads streams at 16 kbit/s better",
            opus.OPUS_MODEL,
        )
    else:
        log.info("Opus streams: %s with LACE (%s)", library.version, library.path)
    return library


async def start_worker(
    adapters: Adapters, model_path: Path | None
) -> tuple[list[asyncio.Task[None]], str | None]:
    """The worker's tasks: a pool for each model it serves (the ``serve``
    setting, see :mod:`voxwire.wire.pools`), each with engines, a stream worker
    and a file worker of its own; and where the engines run (:func:`engine_device`).
    ``model_path``: the default model's file or folder, instead of its name."""
    settings = adapters.settings
    security = settings.security
    await asyncio.to_thread(find_names, security.redact_names, security.redact_places)
    bus = await adapters.bus()
    streaming = settings.engine.worker_kind != "files"
    checkpoints = await adapters.checkpoints() if streaming else None  # Redis, in distributed
    opus_library = opus_decoder() if streaming else None
    streams: list[StreamWorker] = []
    tasks: list[asyncio.Task[None]] = []
    device = None
    for model in settings.worker_models:
        pool = Pool(model, settings.engine.model)
        path = model_path if model_path is not None and model == settings.engine.model else None
        live, files = await _load_pool(adapters, pool, path)
        device = device or engine_device(live or files)
        options = EngineOptions(
            language=settings.engine.language,
            beam_size=settings.engine.beam_size,
            threads=file_engines(settings)[0],
            word_timestamps=settings.engine.word_timestamps,
        )
        if live:
            threads = stream_engines(settings)
            log.info("%s live streams: engines of %s threads", model, "+".join(map(str, threads)))
            stream_worker = StreamWorker(
                bus,
                live,
                replace(options, threads=min(threads), window_s=settings.live.live_window_s),
                checkpoints=checkpoints,
                group=pool.group(Lane.STREAMS),
                pool=pool,
                batch_finals=settings.engine.batch_finals,
                max_streams=settings.engine.max_streams,
                threads=threads,
                cores=cpu_cores(),
                archive=LiveArchiver(adapters.blobs()),
                opus=opus_library,
                tuning=LiveTuning(
                    context_chars=settings.live.stream_context_chars,
                    lead_ms=round(settings.live.stream_lead_s * 1000),
                ),
            )
            streams.append(stream_worker)
            tasks.append(asyncio.create_task(stream_worker.run(), name=f"streams {model}"))
        if files:
            file_worker = FileWorker(
                bus,
                adapters.blobs(),
                files,
                options,
                group=pool.group(Lane.FILES),
                pool=pool,
                drain_s=settings.listen.drain_s,
                busy=lambda: any(each.streams for each in streams),
                fair=settings.engine.file_order == "fair",
                nice=settings.engine.file_nice,
            )
            tasks.append(asyncio.create_task(file_worker.run(), name=f"worker {model}"))
    return tasks, device


async def _load_pool(
    adapters: Adapters, pool: Pool, path: Path | None
) -> tuple[list[Engine], list[Engine]]:
    """The engines of ``pool``'s model, loaded off the loop (``/readyz`` says so
    meanwhile) and closed with the adapters."""
    settings = adapters.settings
    loading = Flag(f"loading {path or pool.model} on {settings.engine.device}")
    name = "engine" if pool.model == pool.default else f"engine {pool.model}"
    adapters.readiness.add_flag(name, loading)
    loaded = await asyncio.to_thread(load_engines, settings, path or pool.model)
    loading.why = None
    calls = adapters.engine_calls  # each call watched: /healthz says when one hangs
    adapters.liveness.add("engines", calls)
    live: list[Engine] = [WatchedEngine(engine, calls) for engine in loaded[0]]
    files: list[Engine] = [WatchedEngine(engine, calls) for engine in loaded[1]]

    async def close_engines() -> None:
        for engine in live + files:
            engine.close()

    adapters.on_close(close_engines)
    return live, files


# -- bridge ------------------------------------------------------------------------------


async def start_bridge(adapters: Adapters) -> list[asyncio.Task[None]]:
    store = await adapters.store()
    bus = await adapters.bus()
    index = await adapters.search()
    link = await adapters.broker()
    settings = adapters.settings
    publishing = publisher(link)
    await asyncio.to_thread(publishing.connect)
    adapters.on_close(lambda: asyncio.to_thread(publishing.close))
    relay = ResultRelay(bus, store, publishing, expiry_s=settings.limits.message_expiry_s)
    indexer = SegmentIndexer(bus, store, index)
    access = await adapters.access()
    pools = await adapters.pools()
    quotas = QuotaGuard(store)
    streams = StreamService(store, bus, access, settings, pools, quotas)
    blobs = adapters.blobs()
    uploads = UploadService(settings, store, bus, blobs, access, pools, quotas)
    parts = PartUploads(blobs, uploads, store)
    eraser = SessionEraser(
        store,
        blobs,
        index,
        bus,
        retained=publishing,
        checkpoints=await adapters.checkpoints(),
        settle_s=settings.limits.sweep_interval_s,
    )
    queries = QueryService(bus, store, index, publishing, streams, parts, settings, eraser)
    intake = ingest(link, bus, settings, store)
    adapters.liveness.add("mqtt relay", publishing.silence)  # /healthz: the broker still heard
    adapters.liveness.add("mqtt ingest", intake.silence)
    where = f"broker at {link.host}:{link.port}"

    def connections() -> str | None:
        down = [name for name, c in (("relay", publishing), ("ingest", intake)) if not c.connected]
        return f"{' and '.join(down)} not connected to the {where}" if down else None

    adapters.readiness.add_flag("mqtt", connections)
    return [
        asyncio.create_task(relay.run(), name="relay"),
        asyncio.create_task(indexer.run(), name="indexer"),
        asyncio.create_task(queries.run(), name="queries"),
        asyncio.create_task(intake.run(), name="ingest"),
    ]


# -- gateway -----------------------------------------------------------------------------

GATEWAY = "gateway"
"""The task that serves HTTP: stopped by asking uvicorn to exit, not cancelled."""


class HttpServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: it stops when the platform
    sets ``should_exit`` (uvicorn's own would stop the server alone on SIGTERM,
    and raise the signal again once it has)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def start_gateway(
    adapters: Adapters, workers: int, device: str | None = None
) -> tuple[uvicorn.Server, list[asyncio.Task[None]]]:
    """``workers``: the engine instances for files in this process (0: elsewhere);
    ``device``: where they run (None: elsewhere)."""
    store = await adapters.store()
    bus = await adapters.bus()
    index = await adapters.search()
    access = await adapters.access()
    if isinstance(access, DynsecAccess):
        keys = [key.id for key in await store.list_api_keys() if key.revoked_at is None]
        await access.complete_key_roles(keys)
        admin = access
        adapters.readiness.add_flag(
            "mqtt", lambda: None if admin.connected else "dynsec admin connection down"
        )
        adapters.liveness.add("mqtt dynsec", admin.silence)
    erasing = eraser_publisher(await adapters.broker())
    await asyncio.to_thread(erasing.connect)
    adapters.on_close(lambda: asyncio.to_thread(erasing.close))
    adapters.liveness.add("mqtt eraser", erasing.silence)
    http_socket = listen(adapters.settings.listen.host, adapters.settings.listen.http_port)
    adapters.bind(http_port=http_socket.getsockname()[1])
    context = GatewayContext(
        adapters.settings,
        store,
        bus,
        adapters.blobs(),
        workers=workers,
        device=device,
        search=index,
        access=access,
        tokens=adapters.tokens(),
        readiness=adapters.readiness,
        liveness=adapters.liveness,
        pools=await adapters.pools(),
        retained=erasing,
        checkpoints=await adapters.checkpoints(),
    )
    app = create_app(context)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_keep_alive=75,
        timeout_graceful_shutdown=math.ceil(adapters.settings.listen.drain_s),
    )
    server = HttpServer(config)
    serving = asyncio.create_task(server.serve(sockets=[http_socket]), name=GATEWAY)
    tasks = [serving]
    if isinstance(access, DynsecAccess):
        tasks.append(asyncio.create_task(sweep_tokens(access), name="token-sweep"))
    limits = adapters.settings.limits
    sweeper = Sweeper(store, app.state.gateway.eraser, limits.retention_days)
    tasks.append(asyncio.create_task(sweeper.run(limits.sweep_interval_s), name="sweeper"))
    webhooks = WebhookSender(store, adapters.settings)
    tasks.append(asyncio.create_task(webhooks.run(), name="webhooks"))
    while not server.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.02)
    return server, tasks


async def sweep_tokens(access: DynsecAccess, every_s: float = 60.0) -> None:
    """Mosquitto does not know when a token expires: delete expired tokens' clients."""
    while True:
        try:
            removed = await access.remove_expired_tokens(time.time())
            if removed:
                log.info("removed %d expired session tokens from the broker", removed)
        except MqttError as exc:
            log.warning("could not sweep expired session tokens: %s", exc)
        await asyncio.sleep(every_s)


def listen(host: str, port: int, setting: str = "http_port") -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({setting}): {exc.strerror}",
            hint=f"another voxwire may be running; stop it or choose another {setting}",
        ) from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock
