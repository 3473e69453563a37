"""The file worker: consumes jobs from the bus, runs them on engine instances,
produces their messages to the results topic (key = sid), and the windows
of committed text each final changes to the windows topic (:mod:`voxwire.wire.windows`).

N engine instances (each loaded once) run jobs concurrently, one job each;
the worker starts a new job only when an instance is free, so at most N jobs
are in flight. The rest wait, read ahead, in per-tenant queues that share the
engines fairly among tenants (:mod:`voxwire.workers.files.lanes`), or on the
bus. A job's offset is committed only after all of its messages were accepted
by the bus. A job whose messages the
bus refused (Kafka away for longer than the producer's delivery timeout) is
run again on the same engine, after a pause that doubles up to
``_RETRY_MAX_S``, until the bus takes them all: positions are committed in
order, so a job left behind would hold back every later job of its partition.

A worker runs the jobs of one model pool (:mod:`voxwire.wire.pools`): the
jobs of other models it passes over, committed, since their own pool's group
reads them too.

Re-transcriptions (``transcription.rejobs``, a group of their own) run only
when the worker is quiet, and give way as soon as it is not
(:mod:`voxwire.workers.files.lanes`): an upload arrives or is in flight, or a live
stream is open in the process (``busy``).

Stopping (cancelled: SIGTERM): the worker takes no new job, lets the jobs in
flight finish and commit for up to ``drain_s``, then aborts those still
running and hands them back (not committed, so the group delivers them again,
and their next run emits every message again, with the same seqs), and closes
its subscription, which commits and leaves the group at once: its partitions
move to the other workers without waiting for the session timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from pydantic import ValidationError

from voxwire.audio.decoding import Audio, pcm16le_to_float32
from voxwire.blobs import BlobStore
from voxwire.bus import Bus, Record, commit_or_warn
from voxwire.core.errors import BusError, VoxwireError
from voxwire.core.metrics import (
    JOB_QUEUE_WAIT,
    JOB_SECONDS,
    JOBS,
    JOBS_IN_FLIGHT,
    REALTIME_FACTOR,
)
from voxwire.sessions.audio import INCOMING_BLOB, Redaction, read_redaction, store_redacted
from voxwire.wire.pools import REJOBS_SUFFIX, WORKER_GROUP, Pool
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC, REJOBS_TOPIC, RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import windows_after
from voxwire.workers.engine import Engine, EngineOptions, TranscriptionAborted
from voxwire.workers.files.job import run_file_job
from voxwire.workers.files.lanes import JobLanes
from voxwire.workers.files.tracks import run_tracks_job
from voxwire.workers.priority import lower_this_thread
from voxwire.workers.transcript import error_message
from voxwire_client.messages import (
    Message,
    SegmentData,
    SegmentMessage,
    TranscriptMessage,
    encode_message,
)
from voxwire_client.options import RedactMode

log = logging.getLogger(__name__)

DRAIN_S = 20.0
"""How long a stopping worker lets its jobs in flight finish by default (the
``drain_s`` setting; Kubernetes gives a pod 30 s between SIGTERM and SIGKILL
by default)."""
_ABORT_S = 5.0
"""How long an aborted job may take to stop before its task is cancelled."""
_RETRY_S = 1.0
_RETRY_MAX_S = 30.0
"""The pause before a job whose messages the bus refused runs again: doubles up to this."""


def load_pcm(blobs: BlobStore, key: str) -> Audio:
    return pcm16le_to_float32(blobs.get(key))


class FileWorker:
    def __init__(
        self,
        bus: Bus,
        blobs: BlobStore,
        engines: Sequence[Engine],
        options: EngineOptions,
        *,
        group: str = WORKER_GROUP,
        pool: Pool | None = None,
        drain_s: float = DRAIN_S,
        busy: Callable[[], bool] = lambda: False,
        fair: bool = True,
        nice: int = 0,
    ) -> None:
        """``pool``: the model whose jobs it runs (None: every job);
        ``busy``: whether live work runs in this process (open live streams):
        re-transcriptions wait while it does; ``fair``: share engine time among
        tenants (False: run jobs in bus order); ``nice``: how much lower than live
        streams the jobs' threads run (:mod:`voxwire.workers.priority`)."""
        if not engines:
            raise ValueError("a worker needs at least one engine instance")
        self._bus = bus
        self._blobs = blobs
        self._idle: asyncio.Queue[Engine] = asyncio.Queue()
        for engine in engines:
            self._idle.put_nowait(engine)
        self._options = options
        self._group = group
        self._pool_of_model = pool
        self._drain_s = drain_s
        self._aborting = False  # read by the engines' threads
        self._tasks: set[asyncio.Task[None]] = set()
        # One thread per engine instance, apart from the default executor.
        self._pool = ThreadPoolExecutor(
            max_workers=len(engines),
            thread_name_prefix="engine",
            initializer=lower_this_thread,
            initargs=(nice,),
        )
        self._busy = busy
        self._fair = fair
        self._uploads_running = 0
        self.jobs_done = 0

    def _quiet(self) -> bool:
        """No upload in flight and no live work: a re-transcription may run."""
        return self._uploads_running == 0 and not self._busy()

    async def run(self) -> None:
        """Consume jobs until cancelled; then drain (see the module doc)."""
        lanes = JobLanes(
            self._bus.subscribe(JOBS_TOPIC, self._group),
            self._bus.subscribe(REJOBS_TOPIC, self._group + REJOBS_SUFFIX),
            takes=self._takes,
            fair=self._fair,
        )
        try:
            while True:
                engine = await self._idle.get()
                try:
                    record, again = await lanes.next(self._quiet)
                except BaseException:
                    self._idle.put_nowait(engine)
                    raise
                if again and not self._takes(record):
                    self._idle.put_nowait(engine)
                    await commit_or_warn(lanes.rejobs, [record])
                    continue
                self._uploads_running += 0 if again else 1
                task = asyncio.create_task(self._handle(record, engine, lanes, again=again))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            await self._drain()
            await lanes.close()
            log.info("%s: stopped (%d jobs done)", self._group, self.jobs_done)
            self._pool.shutdown(wait=False)

    def _takes(self, record: Record) -> bool:
        """Whether the job is of this worker's pool (a malformed one is: it is
        dropped, with a log line, by the pool that takes it)."""
        if self._pool_of_model is None:
            return True
        try:
            model = json.loads(record.value).get("model")
        except (ValueError, AttributeError):
            model = None
        return self._pool_of_model.takes(model if isinstance(model, str) else None)

    async def _drain(self) -> None:
        """Let the jobs in flight finish for up to ``drain_s``; abort the rest,
        uncommitted, so that the group delivers them again."""
        if not self._tasks:
            return
        log.info("stopping: finishing %d job(s) in flight", len(self._tasks))
        _, running = await asyncio.wait(set(self._tasks), timeout=self._drain_s)
        if running:
            log.warning("stopping: aborting %d unfinished job(s), handed back", len(running))
            self._aborting = True
            _, stuck = await asyncio.wait(running, timeout=_ABORT_S)
            for task in stuck:  # an engine that did not stop: leave its thread behind
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _handle(
        self, record: Record, engine: Engine, lanes: JobLanes, *, again: bool
    ) -> None:
        """Run one job; an upload's was counted in ``_uploads_running`` when taken."""
        subscription = lanes.rejobs if again else lanes.uploads

        def abort() -> bool:
            return self._aborting or (again and lanes.must_yield(self._quiet))

        started = time.perf_counter()
        waited = None if record.timestamp is None else max(0.0, time.time() - record.timestamp)
        if waited is not None:
            JOB_QUEUE_WAIT.observe(waited)
        on_bus = "?" if waited is None else f"{waited:.2f}"
        log.info("job %s started (%s s on the bus)", record.key, on_bus)
        JOBS_IN_FLIGHT.inc()
        try:
            try:
                duration_ms = await self._process_until_delivered(record, engine, abort)
            finally:  # the next job need not wait for this one's commit
                self._idle.put_nowait(engine)
                JOBS_IN_FLIGHT.dec()
                if not again:
                    self._uploads_running -= 1
                    lanes.finished(record)
            took = time.perf_counter() - started
            log.info("job %s done in %.2f s", record.key, took)
            JOB_SECONDS.observe(took)
            if duration_ms:
                REALTIME_FACTOR.observe(took / (duration_ms / 1000))
            await subscription.commit(record)
            self.jobs_done += 1
            JOBS.labels(outcome="done").inc()
        except TranscriptionAborted:
            if again and not self._aborting:
                log.info("re-transcription %s gave way to other work; it runs again", record.key)
                lanes.again(record)
                JOBS.labels(outcome="yielded").inc()
                return
            log.info("job %s aborted: the worker is stopping; handed back", record.key)
            JOBS.labels(outcome="handed_back").inc()
        except BusError as exc:  # the commit: e.g. a rebalance moved the partition meanwhile
            log.warning("job %s done but not committed (%s); it may run again", record.key, exc)
            JOBS.labels(outcome="uncommitted").inc()
        except Exception:
            log.exception("job %s failed unexpectedly", record.key)
            JOBS.labels(outcome="failed").inc()

    async def _process_until_delivered(
        self, record: Record, engine: Engine, abort: Callable[[], bool]
    ) -> int:
        """:meth:`_process`, again while the bus refuses the job's messages (each run
        emits them all, with the same seqs); a stopping worker hands the job back."""
        pause = _RETRY_S
        while True:
            try:
                return await self._process(record, engine, abort)
            except BusError as exc:
                if self._aborting:
                    raise TranscriptionAborted("the worker is stopping") from exc
                log.warning(
                    "job %s: the bus refused its messages (%s); running it again in %.0f s",
                    record.key,
                    exc,
                    pause,
                )
                JOBS.labels(outcome="retried").inc()
                await asyncio.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX_S)

    def _stopping(self) -> bool:
        """The engines' ``abort``: True once a stopping worker gave up waiting."""
        return self._aborting

    async def _process(self, record: Record, engine: Engine, abort: Callable[[], bool]) -> int:
        """Run the job; its audio's duration in ms (0: nothing was transcribed)."""
        try:
            job = FileJob.model_validate_json(record.value)
        except ValidationError:
            log.error(
                "dropping a malformed job record (key %s, offset %d)", record.key, record.offset
            )
            return 0
        loop = asyncio.get_running_loop()

        producing: list[Future[None]] = []
        finals: list[SegmentData] = []

        def send(topic: str, key: str, value: bytes) -> None:
            producing.append(
                asyncio.run_coroutine_threadsafe(self._bus.produce(topic, key, value), loop)
            )

        def emit(message: Message) -> None:
            # Called from whisper.cpp's segment callback: hand the message to the
            # loop and return at once (the engine must not wait on the bus). The
            # loop runs the produce calls in the order they were handed over.
            if isinstance(message, TranscriptMessage) and job.redact is not RedactMode.OFF:
                self._store_redacted(job, message)  # before the transcript is out
            send(RESULTS_TOPIC, message.sid, encode_message(message))
            if isinstance(message, SegmentMessage) and message.type == "final" and job.version == 1:
                # a new version's windows: the indexer makes them from its transcript
                finals.append(message.segment)
                for window in windows_after(finals, message.sid):
                    send(WINDOWS_TOPIC, message.sid, window.encode())

        options = replace(self._options, language=job.language, vocabulary=job.vocabulary)
        try:
            audio = await asyncio.to_thread(load_pcm, self._blobs, job.audio_key)
            tracks = [await asyncio.to_thread(load_pcm, self._blobs, k) for k in job.track_keys]
        except VoxwireError as exc:
            failed = error_message(job.sid, job.first_seq, exc, version=job.version)
            await self._bus.produce(RESULTS_TOPIC, job.sid, encode_message(failed))
            return 0
        try:
            if tracks:
                await loop.run_in_executor(
                    self._pool, run_tracks_job, job, tracks, engine, options, emit, abort
                )
            else:
                await loop.run_in_executor(
                    self._pool, run_file_job, job, audio, engine, options, emit, abort
                )
        finally:  # the job counts as done only once the bus has every message
            await asyncio.gather(*(asyncio.wrap_future(f) for f in producing))
        if job.audio_key == self._blobs.key(job.sid, INCOMING_BLOB):
            await asyncio.to_thread(self._forget_incoming, job)
        return job.duration_ms

    def _store_redacted(self, job: FileJob, transcript: TranscriptMessage) -> None:
        """Store the job's audio with what its transcript redacted silenced
        (:mod:`voxwire.sessions.audio`); a blob store that fails leaves the
        session without playable audio, not without its transcript."""
        try:
            pcm = self._blobs.get(job.audio_key)
            redaction = Redaction(transcript.segments, version=job.version)
            done = store_redacted(self._blobs, job.sid, pcm, redaction)
        except VoxwireError as exc:
            log.error("job %s: its redacted audio could not be stored: %s", job.sid, exc)
            return
        log.info("job %s: audio stored with %d span(s) silenced", job.sid, len(done.spans_ms))

    def _forget_incoming(self, job: FileJob) -> None:
        """A redacted upload's audio as recorded (its channels' too), once stored
        redacted: gone."""
        if read_redaction(self._blobs, job.sid) is not None:
            for key in (job.audio_key, *job.track_keys):
                self._blobs.delete(key)
