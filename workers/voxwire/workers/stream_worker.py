"""The stream worker: live sessions from the audio topic, transcribed as they speak.

Consumes ``transcription.audio`` (key = sid, so one session's start, chunks and
end arrive in order on one partition); its records (:mod:`voxwire.wire.records`):

- :class:`~voxwire.wire.records.StreamStart` from the gateway: the session's
  configuration; only the gateway may start a stream;
- :class:`~voxwire.wire.records.ClientPublish` of ``audio/<sid>/chunk/<n>`` from
  a device: PCM16LE 16 kHz mono, chunk ``n``; of ``audio/<sid>/control``:
  ``{"type": "end"}``, or a change of the standing prompts
  (:class:`voxwire_client.api.PromptChange`);
- :class:`~voxwire.wire.records.PromptUpdate` from the gateway: a change of the
  standing prompts through the HTTP API, applied as a device's would be.

Ingestion (VAD and endpointing) runs on the event loop and only queues work;
one engine thread transcribes the queued work of every session in turn, so a
slow transcription never holds up audio. Bad chunks get a non-fatal error
message on their session and never touch other sessions.

Surviving a crash. Before a message goes to the bus, the worker saves the
session's checkpoint (:mod:`voxwire.workers.stream_checkpoints`): the message
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
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from pydantic import ValidationError

from voxwire.bus import Bus, Record, Subscription, commit_or_warn
from voxwire.core.aio import first_failure
from voxwire.core.errors import AudioError, BusError, RecordError, VoxwireError
from voxwire.wire.records import PromptUpdate, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.wire.windows import windows_after
from voxwire.workers.engine import BatchEngine, Engine, EngineOptions, Segment
from voxwire.workers.stream_checkpoints import (
    CheckpointError,
    Checkpoints,
    MemoryCheckpoints,
    StreamCheckpoint,
)
from voxwire.workers.stream_pipeline import (
    FinalWork,
    Resume,
    StreamConfig,
    StreamSession,
    stream_config,
)
from voxwire.workers.vad import SileroVad, Vad
from voxwire_client.api import PromptChange
from voxwire_client.messages import Message, SegmentMessage, encode_message
from voxwire_client.topics import audio_control_topic, parse_audio_topic

log = logging.getLogger(__name__)

STREAM_GROUP = "voxwire-streams"
_IDLE = 99  # the running rank when the engine thread runs nothing
_FINAL_RANKS = (1, 2)  # finals and likely finals (StreamSession.next_rank)
_FINAL_RANK = 1  # finals only: those of several sessions can share an engine call
_PARTIAL_RANK = 3
_UNKNOWN_KEPT = 10_000  # sids remembered as unknown (forgotten all at once past this)


class InvalidChunkError(AudioError):
    code = "invalid_chunk"


class _SessionMoved(Exception):
    """The session's partition went to another worker: emit nothing more."""


class StreamWorker:
    def __init__(
        self,
        bus: Bus,
        engine: Engine,
        options: EngineOptions,
        *,
        checkpoints: Checkpoints | None = None,
        vad_factory: Callable[[], Vad] = SileroVad,
        group: str = STREAM_GROUP,
        batch_finals: int = 1,
    ) -> None:
        self._bus = bus
        self._engine = engine
        # finals of this many sessions at most in one engine call, where the
        # engine can (1: one at a time)
        self._batch = batch_finals if isinstance(engine, BatchEngine) else 1
        self.batches: list[int] = []  # the size of each batched call, for tests and benchmarks
        self._options = options
        self._checkpoints = checkpoints or MemoryCheckpoints()
        self._vad_factory = vad_factory
        self._group = group
        self._sessions: dict[str, StreamSession] = {}
        self._starts: dict[str, bytes] = {}  # the start record of each open session
        self._ending: set[str] = set()
        self._done: set[str] = set()  # every message out: later records are ignored
        self._unknown: set[str] = set()  # no start and no checkpoint seen
        # records not committed yet, by session: (chunk, record); the start is chunk -1
        self._held: dict[str, list[tuple[int, Record]]] = {}
        self._settled: dict[str, int] = {}  # the resume chunk of the last checkpoint saved
        self._partitions: dict[str, int] = {}  # the audio partition of each open session
        self._subscription: Subscription | None = None
        # errors found while ingesting, emitted by the engine thread: emitting
        # waits on the bus, which the event loop thread must never do
        self._errors: list[tuple[StreamSession, VoxwireError]] = []
        self._errors_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stream-engine")
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running_rank = _IDLE  # of the item the engine thread runs
        self._served: dict[str, float] = {}  # when each session's last item began
        self._preempt = threading.Event()  # a more urgent item was queued meanwhile
        self.ignored = 0

    async def run(self) -> None:
        """Ingest and transcribe until one of them fails (then the worker ends,
        and another resumes its sessions) or the task is cancelled."""
        self._loop = asyncio.get_running_loop()
        subscription = self._subscription = self._bus.subscribe(AUDIO_TOPIC, self._group)
        try:
            await first_failure(self._ingest(subscription), self._engine_loop(subscription))
        finally:
            await subscription.close()
            self._pool.shutdown(wait=False)

    async def _ingest(self, subscription: Subscription) -> None:
        while True:
            records = await subscription.next_batch(200)
            free = [record for record in records if not await self._handle(record)]
            for sid in [s for s in self._sessions if not self._owns(s)]:
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
        if audio is None or audio.sid != sid or sid in self._ending:
            self.ignored += 1  # a foreign topic, or audio after the end
            return False
        session = self._sessions.get(sid) or await self._resume(sid, record.partition)
        if session is None:
            self.ignored += 1  # unknown or finished session: nothing to attach it to
            return False
        now = time.monotonic()
        held_for = sys.maxsize if audio.chunk is None else audio.chunk
        try:
            if audio.chunk is not None:
                session.push(audio.chunk, payload, now)
            else:
                held_for = await self._control(sid, session, payload, now)
        except VoxwireError as exc:
            with self._errors_lock:
                self._errors.append((session, exc))
        return self._hold(sid, held_for, record)

    def _hold(self, sid: str, chunk: int, record: Record) -> bool:
        self._held.setdefault(sid, []).append((chunk, record))
        return True

    async def _start(self, sid: str, start: StreamStart, partition: int) -> bool:
        """Open the session a start record describes; False when there is none to open."""
        try:
            config = stream_config(start.request)
        except VoxwireError as exc:
            log.error("stream worker: unusable stream start: %s", exc)
            return False
        if start.sid != sid or sid in self._sessions or sid in self._done:
            return False  # a foreign or redelivered start
        if await self._resume(sid, partition) is not None:
            return True  # it ran elsewhere before: go on from its checkpoint
        if sid in self._done:
            return False
        self._unknown.discard(sid)
        self._open(start, config, start.encode(), None, partition)
        return True

    async def _resume(self, sid: str, partition: int) -> StreamSession | None:
        """Take over a session another worker left: its checkpoint, if any."""
        if sid in self._done or sid in self._unknown:
            return None
        checkpoint = await self._checkpoints.load(sid)
        if checkpoint is None or checkpoint.done:
            (self._done if checkpoint else self._unknown).add(sid)
            if len(self._unknown) > _UNKNOWN_KEPT:
                self._unknown.clear()
            return None
        start = StreamStart.model_validate_json(checkpoint.start)
        config = stream_config(start.request)
        session = self._open(start, config, checkpoint.start, checkpoint.resume, partition)
        self._settled[sid] = checkpoint.resume.chunk
        if checkpoint.last is not None:  # the crash may have come before it reached the bus
            await self._send(checkpoint)
        if checkpoint.resume.finished:
            self._ending.add(sid)
        log.info(
            "stream %s resumed at chunk %d (seq %d)",
            sid,
            checkpoint.resume.chunk,
            checkpoint.resume.next_seq,
        )
        return session

    def _open(
        self,
        start: StreamStart,
        config: StreamConfig,
        payload: bytes,
        resume: Resume | None,
        partition: int,
    ) -> StreamSession:
        session = StreamSession(
            start.sid,
            self._engine,
            self._options,
            config,
            start.request.prompts,
            self._emit,
            vad=self._vad_factory(),
            now=time.monotonic,
            resume=resume,
            preempted=self._preempt.is_set,
            on_queued=self._queued,
        )
        self._sessions[start.sid] = session
        self._starts[start.sid] = payload
        self._partitions[start.sid] = partition
        if resume is None:
            log.info("stream %s opened", start.sid)
        return session

    async def _control(self, sid: str, session: StreamSession, payload: bytes, now: float) -> int:
        """Apply a control message; return the chunk its record is held for."""
        try:
            body = json.loads(payload)
            kind = body.get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind == "end":
            session.end(now)
            self._ending.add(sid)
            return sys.maxsize
        if kind == "prompts":
            try:
                change = PromptChange.model_validate(body)
            except ValidationError as exc:
                raise InvalidChunkError(
                    f"unusable prompt change: {exc.errors()[0]['msg']}", sid=sid
                ) from exc
            # not on the event loop: the change waits for the session's emit lock,
            # which the engine thread holds while it waits for the loop to send
            await asyncio.to_thread(session.change_prompts, change.add, change.remove)
            # committed once a checkpoint after it (with the new prompts) is saved
            return session.next_chunk
        raise InvalidChunkError(
            'control messages are JSON: {"type": "end"} or {"type": "prompts", ...}', sid=sid
        )

    # -- transcription (engine thread) ---------------------------------------------------

    def _queued(self, rank: int) -> None:
        """A session queued work: a final or likely final preempts a partial (not
        a likely final: the final of its segment would reuse its text)."""
        if rank in _FINAL_RANKS and self._running_rank == _PARTIAL_RANK:
            self._preempt.set()

    def _emit(self, message: Message) -> None:
        """Save the session's checkpoint, then hand the message to the bus."""
        assert self._loop is not None
        sid = message.sid
        if not self._owns(sid):
            raise _SessionMoved(sid)
        checkpoint = StreamCheckpoint(
            self._starts[sid], self._sessions[sid].resume_point(), message
        )
        asyncio.run_coroutine_threadsafe(self._save_and_send(checkpoint), self._loop).result()

    async def _save_and_send(self, checkpoint: StreamCheckpoint) -> None:
        assert checkpoint.last is not None
        sid = checkpoint.last.sid
        await self._checkpoints.save(sid, checkpoint)
        self._settled[sid] = checkpoint.resume.chunk
        await self._send(checkpoint)

    async def _send(self, checkpoint: StreamCheckpoint) -> None:
        """The checkpoint's message to the results, and after a final the windows it changed."""
        last = checkpoint.last
        assert last is not None
        await self._bus.produce(RESULTS_TOPIC, last.sid, encode_message(last))
        if isinstance(last, SegmentMessage) and last.type == "final":
            for window in windows_after(checkpoint.resume.finals, last.sid):
                await self._bus.produce(WINDOWS_TOPIC, last.sid, window.encode())

    async def _engine_loop(self, subscription: Subscription) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            finished, moved = await loop.run_in_executor(self._pool, self._drain)
            for sid in moved:
                self._forget(sid)
            for sid in finished:
                await self._close(sid)
            await commit_or_warn(subscription, self._settled_records(finished))

    async def _close(self, sid: str) -> None:
        """The session is done: say so in its checkpoint, forget it here."""
        session = self._sessions[sid]
        done = StreamCheckpoint(self._starts[sid], session.resume_point(), None, done=True)
        await self._checkpoints.save(sid, done)
        self._forget(sid)
        self._done.add(sid)

    def _owns(self, sid: str) -> bool:
        partition = self._partitions.get(sid)
        subscription = self._subscription
        return partition is None or subscription is None or subscription.owns(partition)

    def _forget(self, sid: str) -> None:
        """Drop a session that is done here, or went to another worker (its
        records still held are then the new owner's to commit)."""
        if not self._owns(sid):
            log.info("stream %s moved to another worker", sid)
            self._held.pop(sid, None)
        self._sessions.pop(sid, None)
        self._starts.pop(sid, None)
        self._partitions.pop(sid, None)
        self._settled.pop(sid, None)
        self._served.pop(sid, None)
        self._ending.discard(sid)

    def _settled_records(self, finished: list[str]) -> list[Record]:
        """Held records whose audio is settled or whose session is done, released."""
        out: list[Record] = []
        for sid in list(self._held):
            held = self._held[sid]
            settled = sys.maxsize if sid in finished else self._settled.get(sid)
            if settled is None:
                continue
            out += [record for chunk, record in held if chunk < settled]
            kept = [(chunk, record) for chunk, record in held if chunk >= settled]
            if kept and sid not in finished:
                self._held[sid] = kept
            else:
                del self._held[sid]
        return out

    def _drain(self) -> tuple[list[str], list[str]]:
        """Transcribe what the sessions have queued, the most urgent item of any
        session first (finals before partials: one engine serves them all);
        finish ended sessions. Returns the sessions finished and those that
        moved to another worker."""
        finished: list[str] = []
        moved: list[str] = []
        self._report_errors(moved)
        while True:
            self._running_rank = _IDLE
            self._preempt.clear()
            # Most urgent kind first; within a kind, the session served longest
            # ago, so a session with a backlog (audio sent faster than real
            # time) takes turns with the others instead of going before them.
            ranked = [
                (rank[0], self._served.get(sid, 0.0), rank[1], sid)
                for sid, session in list(self._sessions.items())
                if sid not in moved
                and sid not in finished
                and (rank := session.next_rank()) is not None
            ]
            if not ranked:
                break
            self._running_rank, _, _, sid = min(ranked)
            self._served[sid] = time.monotonic()
            if self._running_rank == _FINAL_RANK and self._batch > 1:
                others = [r[3] for r in sorted(ranked) if r[0] == _FINAL_RANK and r[3] != sid]
                if self._run_finals([sid, *others], moved, finished):
                    continue
            try:
                self._sessions[sid].run_next()
            except _SessionMoved:
                moved.append(sid)
            except (BusError, CheckpointError):
                raise  # the session is fine, the worker cannot deliver: end the worker
            except Exception:
                log.exception("stream %s failed", sid)
                finished.append(sid)
        ending = [s for s in list(self._ending) if s in self._sessions]
        self._report_errors(moved)  # those found before the ends just seen come first
        for sid in ending:
            if sid in moved or sid in finished:
                continue
            try:
                self._sessions[sid].finish()
            except _SessionMoved:
                moved.append(sid)
                continue
            except (BusError, CheckpointError):
                raise
            except Exception:
                log.exception("stream %s failed", sid)
            finished.append(sid)
        return finished, moved

    def _run_finals(self, sids: list[str], moved: list[str], finished: list[str]) -> bool:
        """Transcribe the waiting finals of ``sids`` (most urgent first) in one
        engine call, those with the first one's options; False when the first
        has none to batch (then it runs alone)."""
        first = self._sessions[sids[0]]
        taken: list[tuple[StreamSession, FinalWork, float]] = []
        for sid in sids:
            session = self._sessions[sid]
            if len(taken) == self._batch or session.options != first.options:
                continue
            took = session.take_final()
            if took is not None:
                taken.append((session, *took))
                self._served[sid] = time.monotonic()
            elif sid == sids[0]:
                return False
        outcomes: list[list[Segment]] | VoxwireError
        try:
            if len(taken) == 1:  # alone: as run_next would
                outcomes = [self._engine.transcribe(taken[0][1].audio, first.options)]
            else:
                engine = cast(BatchEngine, self._engine)
                outcomes = engine.transcribe_batch([w.audio for _, w, _ in taken], first.options)
                self.batches.append(len(taken))
        except VoxwireError as exc:
            outcomes = exc
        for i, (session, work, started) in enumerate(taken):
            outcome = outcomes if isinstance(outcomes, VoxwireError) else outcomes[i]
            try:
                session.complete_final(work, outcome, started)
            except _SessionMoved:
                moved.append(session.sid)
            except (BusError, CheckpointError):
                raise
            except Exception:
                log.exception("stream %s failed", session.sid)
                finished.append(session.sid)
        return True

    def _report_errors(self, moved: list[str]) -> None:
        """Emit the errors ingestion found (on this thread: emitting waits on the bus)."""
        with self._errors_lock:
            errors, self._errors = self._errors, []
        for session, exc in errors:
            try:
                session.error(exc)
            except _SessionMoved:
                moved.append(session.sid)
