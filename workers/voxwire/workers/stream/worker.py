"""The stream worker: live sessions from the audio topic, transcribed as they speak.

Consumes ``transcription.audio`` (key = sid, so one session's start, chunks and
end arrive on one partition, in order from each bridge; chunks that passed each
other through different bridges wait for their turn, and an end for the chunks
before it, up to :data:`END_WAIT_S`: :mod:`voxwire.workers.stream.intake`); its
records (:mod:`voxwire.wire.records`):

- :class:`~voxwire.wire.records.StreamStart` from the gateway: the session's
  configuration; only the gateway may start a stream;
- :class:`~voxwire.wire.records.ClientPublish` of ``audio/<sid>/chunk/<n>`` from
  a device: chunk ``n`` in the stream's codec (PCM16LE 16 kHz mono, or one Opus
  packet: :mod:`voxwire.audio.codecs`); of ``audio/<sid>/control``:
  ``{"type": "end"}``, or a change of the standing prompts
  (:class:`voxwire_client.api.PromptChange`);
- :class:`~voxwire.wire.records.PromptUpdate` from the gateway: a change of the
  standing prompts through the HTTP API, applied as a device's would be.

Ingestion (VAD and endpointing, :mod:`voxwire.workers.stream.intake`) runs on
the event loop and only queues work; the engines' threads (one per engine)
run the :class:`~voxwire.workers.stream.scheduler.Scheduler` over the queued
work of every session, so a slow transcription never holds up audio. The worker keeps
one :class:`~voxwire.workers.stream.scheduler.LiveSession` record per open
session. Bad chunks get a non-fatal error message on their session and never
touch other sessions.

Surviving a crash. Before a message goes to the bus, the worker saves the
session's checkpoint (:mod:`voxwire.workers.stream.checkpoints`): the message
and the resume point after it. An audio record is committed only once the
audio it holds is settled (the saved resume point is past its chunk) or its
session is done, so after a crash the group hands the partition to another
worker with every unsettled record still to come. That worker meets a session
it does not know, loads its checkpoint, emits the saved message again and
goes on from the resume point; seq, segment index and stream time carry on,
and no final is repeated or lost (``test_a_stream_resumed_after_any_message``
and the distributed fault test show it). A worker that loses a session's
partition to a rebalance (another worker joined) drops the session without
emitting more: the new owner resumes it the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pydantic import ValidationError

from voxwire.audio.libopus import OpusLibrary
from voxwire.bus import Bus, Record, Subscription, commit_or_warn
from voxwire.core.aio import first_failure
from voxwire.core.errors import AudioError, RecordError, VoxwireError
from voxwire.core.metrics import LIVE_STREAMS, STREAMS_REFUSED
from voxwire.wire.pools import STREAM_GROUP, Pool
from voxwire.wire.records import PromptUpdate, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import windows_after
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.stream.archive import AudioParts, LiveArchiver
from voxwire.workers.stream.checkpoints import Checkpoints, MemoryCheckpoints, StreamCheckpoint
from voxwire.workers.stream.intake import ChunkOrderError
from voxwire.workers.stream.scheduler import LiveSession, Scheduler, SessionMoved
from voxwire.workers.stream.session import Resume, StreamSession, stream_config
from voxwire.workers.vad import SileroVad, Vad
from voxwire_client.api import PromptChange
from voxwire_client.messages import Message, SegmentMessage, encode_message
from voxwire_client.topics import audio_control_topic, parse_audio_topic

log = logging.getLogger(__name__)

_UNKNOWN_KEPT = 10_000  # sids remembered as unknown (forgotten all at once past this)


@dataclass(frozen=True, slots=True)
class _Opening:
    """How this worker opens a session: its engine options, a VAD for each, the archive."""

    options: EngineOptions
    vad_factory: Callable[[], Vad]
    archive: LiveArchiver | None
    opus: OpusLibrary | None


@dataclass(frozen=True, slots=True)
class _Limits:
    """Live streams held at most (0: no limit); how long an end waits for chunks."""

    max_streams: int
    end_wait_s: float


class InvalidChunkError(AudioError):
    code = "invalid_chunk"


class TooManyStreamsError(VoxwireError):
    """The worker already holds as many live streams as it may (``max_streams``)."""

    code = "too_many_streams"


END_WAIT_S = 30.0
"""How long an end waits for the chunks before it that have not come (a killed
bridge's share of them comes once it is back); then the stream ends without them
(the chunks after them are transcribed)."""


class StreamWorker:
    def __init__(
        self,
        bus: Bus,
        engines: Engine | Sequence[Engine],
        options: EngineOptions,
        *,
        checkpoints: Checkpoints | None = None,
        vad_factory: Callable[[], Vad] = SileroVad,
        group: str = STREAM_GROUP,
        pool: Pool | None = None,
        batch_finals: int = 1,
        max_streams: int = 0,
        threads: Sequence[int] = (),
        cores: int = 0,
        archive: LiveArchiver | None = None,
        end_wait_s: float = END_WAIT_S,
        opus: OpusLibrary | None = None,
    ) -> None:
        """``engines``: each transcribes one session's work at a time, on a thread
        of its own. ``batch_finals``: the finals of this many sessions at most
        in one engine call, where the engine can (1: one at a time).
        ``max_streams``: live streams held at most; a stream that starts past
        it gets a fatal ``too_many_streams`` error (0: no limit). ``threads``
        (per engine) and ``cores``: see :class:`~voxwire.workers.stream.scheduler.Scheduler`.
        ``archive``: where the streams' audio is kept (:mod:`voxwire.workers.stream.archive`;
        None: not kept). ``pool``: the model whose streams it transcribes (None:
        every stream); another model's are passed over (:mod:`voxwire.wire.pools`).
        ``end_wait_s``: how long an end waits for the chunks before it.
        ``opus``: the libopus that decodes Opus streams (None: FFmpeg's decoder)."""
        self._bus = bus
        self._scheduler = Scheduler(
            engines, now=time.monotonic, batch_finals=batch_finals, threads=threads, cores=cores
        )
        self._opening = _Opening(options, vad_factory, archive, opus)
        self._checkpoints = checkpoints or MemoryCheckpoints()
        self._group = group
        self._pool_of_model = pool
        self._limits = _Limits(max_streams, end_wait_s)
        self._live: dict[str, LiveSession] = {}  # the open sessions
        self._done: set[str] = set()  # every message out: later records are ignored
        self._unknown: set[str] = set()  # no start and no checkpoint seen
        self._subscription: Subscription | None = None
        self._pool = ThreadPoolExecutor(
            max_workers=self._scheduler.engines, thread_name_prefix="stream-engine"
        )
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ignored = 0

    @property
    def streams(self) -> int:
        """The live streams open here."""
        return len(self._live)

    @property
    def batches(self) -> list[int]:
        """The size of each batched engine call, for tests and benchmarks."""
        return self._scheduler.batches

    async def run(self) -> None:
        """Ingest and transcribe until one of them fails (then the worker ends,
        and another resumes its sessions) or the task is cancelled."""
        self._loop = asyncio.get_running_loop()
        subscription = self._subscription = self._bus.subscribe(AUDIO_TOPIC, self._group)
        try:
            await first_failure(
                self._ingest(subscription),
                self._engine_loops(subscription),
                self._give_up_waiting_ends(),
            )
        finally:
            await subscription.close()
            self._pool.shutdown(wait=False)
            if self._opening.archive is not None:
                await self._opening.archive.close()

    async def _ingest(self, subscription: Subscription) -> None:
        while True:
            records = await subscription.next_batch(200)
            free = [record for record in records if not await self._handle(record)]
            for sid in [s for s in self._live if not self._owns(s)]:
                self._forget(sid)
            self._wake.set()
            await commit_or_warn(subscription, free)

    # -- ingestion (event loop) ----------------------------------------------------------

    async def _handle(self, record: Record) -> bool:
        """Take one audio record; True when it is held until its audio is settled."""
        try:
            body = decode_audio_record(record.value)
        except RecordError as exc:
            log.warning("stream worker: malformed audio record (key %s): %s", record.key, exc)
            return False
        if isinstance(body, StreamStart):
            if not await self._start(record.key, body, record.partition):
                return False
            return self._hold(record.key, -1, record)
        if isinstance(body, PromptUpdate):  # from the HTTP API: as a control message
            topic, payload = audio_control_topic(body.sid), body.change.model_dump_json().encode()
        else:
            topic, payload = body.topic, body.payload
        try:
            audio = parse_audio_topic(topic)
        except ValueError:
            audio = None
        sid = record.key
        live = self._live.get(sid)
        if audio is None or audio.sid != sid or (live is not None and live.ending):
            self.ignored += 1  # a foreign topic, or audio after the end
            return False
        live = live or await self._resume(sid, record.partition)
        if live is None:
            self.ignored += 1  # unknown or finished session: nothing to attach it to
            return False
        now = time.monotonic()
        held_for = sys.maxsize if audio.chunk is None else audio.chunk
        try:
            if audio.chunk is not None:
                live.session.push(audio.chunk, payload, now)
            else:
                held_for = await self._control(live, payload, now)
        except VoxwireError as exc:
            self._scheduler.report(live.session, exc)
        self._archive(live)
        live.ending = live.session.ended  # an end that waited for this chunk came with it
        return self._hold(sid, held_for, record)

    def _hold(self, sid: str, chunk: int, record: Record) -> bool:
        live = self._live.get(sid)
        if live is None:
            return False
        live.held.append((chunk, record))
        return True

    async def _start(self, sid: str, start: StreamStart, partition: int) -> bool:
        """Open the session a start record describes; False when there is none to open."""
        try:
            stream_config(start.request)
        except VoxwireError as exc:
            log.error("stream worker: unusable stream start: %s", exc)
            return False
        if start.sid != sid or sid in self._live or sid in self._done:
            return False  # a foreign or redelivered start
        if not self._takes(start):
            self._unknown.add(sid)  # another model's pool transcribes it
            return False
        if await self._resume(sid, partition) is not None:
            return True  # it ran elsewhere before: go on from its checkpoint
        if sid in self._done:
            return False
        self._unknown.discard(sid)
        full = 0 < self._limits.max_streams <= len(self._live)
        live = self._open(start, start.encode(), None, partition)
        if full:
            self._refuse(live)
        return True

    def _takes(self, start: StreamStart) -> bool:
        return self._pool_of_model is None or self._pool_of_model.takes(start.request.model)

    def _refuse(self, live: LiveSession) -> None:
        """Close a stream the worker cannot hold with a fatal error (sent by
        the next drain), rather than let every stream fall behind."""
        STREAMS_REFUSED.inc()
        sid = live.session.sid
        log.warning("stream %s refused: %d live streams already", sid, self._limits.max_streams)
        error = TooManyStreamsError(
            f"this worker already transcribes {self._limits.max_streams} live streams, its limit",
            hint="retry in a minute, or add stream workers (max_streams sets the limit)",
            sid=sid,
        )
        self._scheduler.report(live.session, error, fatal=True)
        live.session.end(time.monotonic())
        live.ending = True

    async def _resume(self, sid: str, partition: int) -> LiveSession | None:
        """Take over a session another worker left: its checkpoint, if any."""
        if sid in self._done or sid in self._unknown:
            return None
        checkpoint = await self._checkpoints.load(sid)
        if checkpoint is not None and not self._takes(
            StreamStart.model_validate_json(checkpoint.start)
        ):
            checkpoint = None  # another model's pool left it: it resumes it
        if checkpoint is None or checkpoint.done:
            (self._done if checkpoint else self._unknown).add(sid)
            if len(self._unknown) > _UNKNOWN_KEPT:
                self._unknown.clear()
            return None
        start = StreamStart.model_validate_json(checkpoint.start)
        live = self._open(start, checkpoint.start, checkpoint.resume, partition)
        live.settled = checkpoint.resume.chunk
        if checkpoint.last is not None:  # the crash may have come before it reached the bus
            await self._send(checkpoint)
        live.ending = checkpoint.resume.finished
        log.info(
            "stream %s resumed at chunk %d (seq %d)",
            sid,
            checkpoint.resume.chunk,
            checkpoint.resume.next_seq,
        )
        return live

    def _open(
        self, start: StreamStart, payload: bytes, resume: Resume | None, partition: int
    ) -> LiveSession:
        opening = self._opening
        parts = AudioParts() if opening.archive is not None else None
        session = StreamSession(
            start.sid,
            opening.options,
            stream_config(start.request),
            start.request.prompts,
            self._emit,
            vad=opening.vad_factory(),
            now=time.monotonic,
            resume=resume,
            on_queued=self._scheduler.queued,
            keep_audio=None if parts is None else parts.decoder,
            opus=opening.opus,
        )
        live = self._live[start.sid] = LiveSession(session, payload, partition, archive=parts)
        LIVE_STREAMS.set(len(self._live))
        if resume is None:
            log.info("stream %s opened", start.sid)
        return live

    async def _control(self, live: LiveSession, payload: bytes, now: float) -> int:
        """Apply a control message; return the chunk its record is held for."""
        session = live.session
        try:
            body = json.loads(payload)
            kind = body.get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind == "end":
            session.end(now)  # it waits while chunks before it are missing
            return sys.maxsize
        if kind == "prompts":
            try:
                change = PromptChange.model_validate(body)
            except ValidationError as exc:
                raise InvalidChunkError(
                    f"unusable prompt change: {exc.errors()[0]['msg']}", sid=session.sid
                ) from exc
            # not on the event loop: the change waits for the session's emit lock,
            # which the engine thread holds while it waits for the loop to send
            await asyncio.to_thread(session.change_prompts, change.add, change.remove)
            # committed once a checkpoint after it (with the new prompts) is saved
            return session.next_chunk
        raise InvalidChunkError(
            'control messages are JSON: {"type": "end"} or {"type": "prompts", ...}',
            sid=session.sid,
        )

    async def _give_up_waiting_ends(self) -> None:
        """End the streams whose end waited ``end_wait_s`` (:data:`END_WAIT_S`)
        for chunks that never came, with the chunks that came after them,
        telling their clients which are missing."""
        while True:
            await asyncio.sleep(min(1.0, self._limits.end_wait_s / 4))
            now = time.monotonic()
            for live in list(self._live.values()):
                session, since = live.session, live.session.end_waiting_since
                if since is None or now - since < self._limits.end_wait_s:
                    continue
                first, last = session.missing or (session.next_chunk, session.next_chunk)
                gap = ChunkOrderError(
                    f"chunks {first} to {last} never arrived: the stream ended without them",
                    hint="send chunks in order, numbered consecutively from 0",
                    sid=session.sid,
                )
                self._scheduler.report(session, gap)
                session.end(now, give_up=True)
                live.ending = True
                self._wake.set()

    # -- transcription (engine thread) ---------------------------------------------------

    def _emit(self, message: Message) -> None:
        """Save the session's checkpoint, then hand the message to the bus."""
        assert self._loop is not None
        sid = message.sid
        live = self._live.get(sid)
        if live is None or not self._owns(sid):
            raise SessionMoved(sid)
        checkpoint = StreamCheckpoint(live.start, live.session.resume_point(), message)
        asyncio.run_coroutine_threadsafe(self._save_and_send(checkpoint), self._loop).result()

    async def _save_and_send(self, checkpoint: StreamCheckpoint) -> None:
        assert checkpoint.last is not None
        sid = checkpoint.last.sid
        await self._checkpoints.save(sid, checkpoint)
        live = self._live.get(sid)
        if live is not None:
            live.settled = checkpoint.resume.chunk
        await self._send(checkpoint)

    async def _send(self, checkpoint: StreamCheckpoint) -> None:
        """The checkpoint's message to the results, and after a final the windows it changed."""
        last = checkpoint.last
        assert last is not None
        await self._bus.produce(RESULTS_TOPIC, last.sid, encode_message(last))
        if isinstance(last, SegmentMessage) and last.type == "final":
            for window in windows_after(checkpoint.resume.finals, last.sid):
                await self._bus.produce(WINDOWS_TOPIC, last.sid, window.encode())

    async def _engine_loops(self, subscription: Subscription) -> None:
        """One loop per engine; they share the sessions (see the scheduler)."""
        loops = [self._engine_loop(subscription, slot) for slot in range(self._scheduler.engines)]
        await first_failure(*loops)

    async def _engine_loop(self, subscription: Subscription, slot: int) -> None:
        loop = asyncio.get_running_loop()
        drain = self._scheduler.drain
        while True:
            await self._wake.wait()
            self._wake.clear()
            drained = await loop.run_in_executor(self._pool, drain, self._live, slot)
            if drained.handed_off:
                self._wake.set()  # the work this engine left is another's
            for sid in drained.moved:
                self._forget(sid)
            free: list[Record] = []
            for sid in drained.finished:
                free += await self._close(sid)
            await commit_or_warn(subscription, free + self._settled_records())

    async def _close(self, sid: str) -> list[Record]:
        """The session is done: say so in its checkpoint, forget it here.
        Returns its held records, free to commit (none when it was closed already)."""
        live = self._live.get(sid)
        if live is None:
            return []
        done = StreamCheckpoint(live.start, live.session.resume_point(), None, done=True)
        await self._checkpoints.save(sid, done)
        if self._opening.archive is not None and live.archive is not None:
            self._opening.archive.finish(sid, live.archive.take() + live.archive.flush())
        self._forget(sid)
        self._done.add(sid)
        return [record for _, record in live.held]

    def _archive(self, live: LiveSession) -> None:
        """Hand the parts of audio that filled up to the archive."""
        if self._opening.archive is None or live.archive is None:
            return
        self._opening.archive.write(live.session.sid, live.archive.take())

    def _owns(self, sid: str) -> bool:
        live = self._live.get(sid)
        subscription = self._subscription
        return live is None or subscription is None or subscription.owns(live.partition)

    def _forget(self, sid: str) -> None:
        """Drop a session that is done here, or went to another worker (its
        records still held are then the new owner's to commit)."""
        if not self._owns(sid):
            log.info("stream %s moved to another worker", sid)
        self._live.pop(sid, None)
        LIVE_STREAMS.set(len(self._live))

    def _settled_records(self) -> list[Record]:
        """Held records whose audio is settled, released."""
        out: list[Record] = []
        for live in self._live.values():
            if live.settled is None:
                continue
            out += [record for chunk, record in live.held if chunk < live.settled]
            live.held = [(chunk, record) for chunk, record in live.held if chunk >= live.settled]
        return out
