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
  ``{"type": "end"}``, ``{"type": "flush"}`` (the open utterance's final now:
  :meth:`~voxwire.workers.stream.session.StreamSession.flush`), or a change of
  the standing prompts (:class:`voxwire_client.api.PromptChange`);
- :class:`~voxwire.wire.records.PromptUpdate` from the gateway: a change of the
  standing prompts through the HTTP API, applied as a device's would be.

Ingestion (VAD and endpointing, :mod:`voxwire.workers.stream.intake`) runs on
the event loop and only queues work. One loop per engine (on the event loop
too) claims the most urgent item of any session from the
:class:`~voxwire.workers.stream.scheduler.Scheduler`, awaits its decode on the
engine's thread, commits it, and hands what the session decided to the
session's :class:`~voxwire.workers.stream.outbox.Outbox` at once: a final goes
out as soon as its decode returns, and a slow transcription never holds up
audio. The session's state changes only on the event loop, between decodes
(a prompt change is applied where it arrives); the engine's thread calls
nothing back. The worker keeps one :class:`LiveSession` record per open
session. Bad chunks get a non-fatal error message on their session and never
touch other sessions.

Surviving a crash. Before messages go to the bus, the outbox saves the
session's checkpoint (:mod:`voxwire.workers.stream.checkpoints`): the
messages and the resume point after them. An audio record is committed only
once the audio it holds is settled (the saved resume point is past its chunk)
or its session is done, so after a crash the group hands the partition to
another worker with every unsettled record still to come. That worker meets a
session it does not know, loads its checkpoint, sends the saved messages
again and goes on from the resume point; seq, segment index and stream time
carry on, and no final is decided twice or lost
(``test_a_stream_resumed_after_any_checkpoint`` and the distributed fault
test show it). A worker that loses a session's partition to a rebalance
(another worker joined) drops the session without sending more: the new owner
resumes it the same way. A worker that cannot save or send ends (the error
names the session): its sessions resume elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from pydantic import ValidationError

from voxwire.audio.libopus import OpusLibrary
from voxwire.bus import Bus, Record, Subscription, commit_or_warn
from voxwire.core.aio import first_failure
from voxwire.core.errors import AudioError, RecordError, VoxwireError
from voxwire.core.metrics import LIVE_STREAMS, STREAMS_REFUSED
from voxwire.sessions.audio import Redaction
from voxwire.wire.pools import STREAM_GROUP, Pool
from voxwire.wire.records import ClientPublish, PromptUpdate, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.stream.archive import AudioParts, LiveArchiver, silenced_part
from voxwire.workers.stream.checkpoints import Checkpoints, MemoryCheckpoints
from voxwire.workers.stream.config import UNTUNED, LiveTuning
from voxwire.workers.stream.intake import ChunkOrderError
from voxwire.workers.stream.outbox import Outbox
from voxwire.workers.stream.scheduler import Idle, Scheduler
from voxwire.workers.stream.session import Outbound, Resume, StreamSession, stream_config
from voxwire.workers.vad import SileroVad, Vad
from voxwire_client.api import PromptChange, StreamControl
from voxwire_client.options import RedactMode
from voxwire_client.topics import parse_audio_topic

log = logging.getLogger(__name__)

_UNKNOWN_KEPT = 10_000  # sids remembered as unknown (forgotten all at once past this)


@dataclass(eq=False)
class LiveSession:
    """What a worker keeps of one live session."""

    session: StreamSession
    outbox: Outbox
    """Where what the session decides goes: checkpoint, then the bus."""
    partition: int
    """The audio partition the session's records come from."""
    held: list[tuple[int, Record]] = field(default_factory=list)
    """Records not committed yet, with the chunk each is held for (the start: -1)."""
    ending: bool = False
    """The end arrived: later records are ignored, the transcript is due."""
    closing: bool = False
    """Its transcript is on its way out and its last checkpoint next."""
    archive: AudioParts | None = None
    """The session's audio not written to the archive yet (None: not archived)."""
    redact: RedactMode = RedactMode.OFF
    """The session's redaction: its archived audio is redacted too."""
    keep_original_audio: bool = False
    """A redacted session's audio as recorded is archived too."""


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
        tuning: LiveTuning = UNTUNED,
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
        ``opus``: the libopus that decodes Opus streams (None: FFmpeg's decoder).
        ``tuning``: how every stream's finals are decoded (:class:`LiveTuning`)."""
        self._bus = bus
        self._scheduler = Scheduler(
            engines, now=time.monotonic, batch_finals=batch_finals, threads=threads, cores=cores
        )
        self._options, self._tuning = options, tuning
        self._vad_factory = vad_factory
        self._archiver = archive
        self._opus = opus
        self._checkpoints = checkpoints or MemoryCheckpoints()
        self._group = group
        self._pool_of_model = pool
        self._max_streams = max_streams
        self._end_wait_s = end_wait_s
        self._live: dict[str, LiveSession] = {}  # the open sessions
        self._done: set[str] = set()  # every message out: later records are ignored
        self._unknown: set[str] = set()  # no start and no checkpoint seen
        self._subscription: Subscription | None = None
        self._pool = ThreadPoolExecutor(
            max_workers=self._scheduler.engines, thread_name_prefix="stream-engine"
        )
        self._wakes = [asyncio.Event() for _ in range(self._scheduler.engines)]  # per engine loop
        self._handed_in: list[Coroutine[object, object, None]] = []  # awaited after each batch
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
        subscription = self._subscription = self._bus.subscribe(AUDIO_TOPIC, self._group)
        try:
            await first_failure(
                self._ingest(subscription),
                self._engine_loops(subscription),
                self._give_up_waiting_ends(),
            )
        finally:
            for unsent in self._handed_in:  # the batch they came with is not committed
                unsent.close()
            await subscription.close()
            self._pool.shutdown(wait=False)
            if self._archiver is not None:
                await self._archiver.close()

    async def _ingest(self, subscription: Subscription) -> None:
        while True:
            records = await subscription.next_batch(200)
            free = [record for record in records if not await self._handle(record)]
            for sid in [s for s in self._live if not self._owns(s)]:
                self._forget(sid)
            self._wake_engines()
            handed_in, self._handed_in = self._handed_in, []
            await asyncio.gather(*handed_in)  # the errors found: out before their records commit
            await commit_or_warn(subscription, free + self._settled_records())

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
        target, chunk, payload = _addressed(body)
        sid = record.key
        live = self._live.get(sid)
        if target != sid or (live is not None and live.ending):
            self.ignored += 1  # a foreign topic, or audio after the end
            return False
        live = live or await self._resume(sid, record.partition)
        if live is None:
            self.ignored += 1  # unknown or finished session: nothing to attach it to
            return False
        held_for = sys.maxsize if chunk is None else chunk
        try:
            held_for = self._apply(live.session, chunk, payload)
        except VoxwireError as exc:
            self._hand_in(live.session, live.session.error(exc))
        self._archive(live)
        live.ending = live.session.ended  # an end that waited for this chunk came with it
        return self._hold(sid, held_for, record)

    def _apply(
        self, session: StreamSession, chunk: int | None, payload: bytes | PromptChange
    ) -> int:
        """Apply a chunk (``chunk`` its number) or a control message to the
        session; return the chunk its record is held for."""
        now = time.monotonic()
        if isinstance(payload, bytes) and chunk is not None:
            session.push(chunk, payload, now)
            return chunk
        control = parse_control(payload, session.sid) if isinstance(payload, bytes) else payload
        if control is StreamControl.END:
            session.end(now)  # it waits while chunks before it are missing
            return sys.maxsize
        if control is StreamControl.FLUSH:
            session.flush(now)  # redelivered after a crash, it closes the same utterance
            return session.next_chunk
        session.change_prompts(control.add, control.remove)
        # committed once a checkpoint after it (with the new prompts) is saved
        return session.next_chunk

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
        full = 0 < self._max_streams <= len(self._live)
        live = self._open(start, start.encode(), None, partition)
        if full:
            self._refuse(live)
        return True

    def _takes(self, start: StreamStart) -> bool:
        return self._pool_of_model is None or self._pool_of_model.takes(start.request.model)

    def _refuse(self, live: LiveSession) -> None:
        """Close a stream the worker cannot hold with a fatal error, rather
        than let every stream fall behind."""
        STREAMS_REFUSED.inc()
        sid = live.session.sid
        log.warning("stream %s refused: %d live streams already", sid, self._max_streams)
        error = TooManyStreamsError(
            f"this worker already transcribes {self._max_streams} live streams, its limit",
            hint="retry in a minute, or add stream workers (max_streams sets the limit)",
            sid=sid,
        )
        self._hand_in(live.session, live.session.error(error, fatal=True))
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
        # first in the session's line: the crash may have come before it reached the bus
        self._handed_in.append(self._sent(live, live.outbox.resend(checkpoint)))
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
        parts = AudioParts() if self._archiver is not None else None
        settled = None if resume is None else resume.chunk
        owned = partial(self._owns_partition, partition)
        outbox = Outbox(
            start.sid, payload, self._bus, self._checkpoints, owned=owned, settled=settled
        )
        session = StreamSession(
            start.sid,
            self._options,
            stream_config(start.request),
            start.request.prompts,
            vad=self._vad_factory(),
            vad_factory=self._vad_factory,  # each further channel's
            tuning=self._tuning,
            now=time.monotonic,
            resume=resume,
            on_queued=self._scheduler.queued,
            keep_audio=None if parts is None else parts.decoder,
            opus=self._opus,
        )
        live = self._live[start.sid] = LiveSession(
            session,
            outbox,
            partition,
            archive=parts,
            redact=start.request.redact or RedactMode.OFF,
            keep_original_audio=start.request.keep_original_audio,
        )
        LIVE_STREAMS.set(len(self._live))
        if resume is None:
            log.info("stream %s opened", start.sid)
        return live

    async def _give_up_waiting_ends(self) -> None:
        """End the streams whose end waited ``end_wait_s`` (:data:`END_WAIT_S`)
        for chunks that never came, with the chunks that came after them,
        telling their clients which are missing."""
        while True:
            await asyncio.sleep(min(1.0, self._end_wait_s / 4))
            now = time.monotonic()
            for live in list(self._live.values()):
                session, since = live.session, live.session.end_waiting_since
                if since is None or now - since < self._end_wait_s:
                    continue
                first, last = session.missing or (session.next_chunk, session.next_chunk)
                gap = ChunkOrderError(
                    f"chunks {first} to {last} never arrived: the stream ended without them",
                    hint="send chunks in order, numbered consecutively from 0",
                    sid=session.sid,
                )
                reported = session.error(gap)
                session.end(now, give_up=True)
                live.ending = True
                self._wake_engines()
                await self._send(session, reported)

    # -- transcription (engine loops) -----------------------------------------------------

    async def _engine_loops(self, subscription: Subscription) -> None:
        """One loop per engine; they share the sessions (see the scheduler)."""
        loops = [self._engine_loop(subscription, slot) for slot in range(self._scheduler.engines)]
        await first_failure(*loops)

    async def _engine_loop(self, subscription: Subscription, slot: int) -> None:
        """Engine ``slot``: claim the most urgent item (here, on the event loop),
        await its decode on the engine's thread, commit it and hand what it came
        to to the outboxes at once; with nothing to claim, finish the sessions
        that ended, and wait."""
        loop = asyncio.get_running_loop()
        scheduler, wake = self._scheduler, self._wakes[slot]
        while True:
            claim = scheduler.claim({sid: live.session for sid, live in self._live.items()}, slot)
            if isinstance(claim, Idle):
                if claim is Idle.HANDED_OFF:
                    self._wake_engines(but=slot)
                free = await self._finish_ended(list(self._live.values()))
                await commit_or_warn(subscription, free + self._settled_records())
                await wake.wait()
                wake.clear()
                continue
            if claim.needs_thread:
                decoded = await loop.run_in_executor(self._pool, scheduler.decode, claim)
            else:  # nothing to decode (progress, a final with its likely final's text)
                decoded = scheduler.decode(claim)
            # every place in the outboxes' lines taken before anything is awaited
            committed = scheduler.commit(claim, decoded)
            sending = [self._send(session, out) for session, out in committed]
            self._wake_engines(but=slot)  # the claim is released: others may take what waits
            await asyncio.gather(*sending)
            lives = [self._live.get(session.sid) for session, _ in committed]
            for live in lives:  # its finals settled further: parts held for them may go
                if live is not None:
                    self._archive(live)
            free = await self._finish_ended([live for live in lives if live is not None])
            await commit_or_warn(subscription, free)  # an ended stream closes without waiting

    def _hand_in(self, session: StreamSession, out: Outbound) -> None:
        """What ``session`` decided on ingestion, to its outbox: in line now,
        awaited once the batch of records is handled."""
        self._handed_in.append(self._send(session, out))

    def _send(self, session: StreamSession, out: Outbound) -> Coroutine[object, object, None]:
        """Hand what ``session`` decided to its outbox: its place in the line is
        taken now. Await it: out, or dropped when the session went to another
        worker (then forgotten here)."""
        live = self._live.get(session.sid)
        if live is None or live.session is not session:
            return _nothing()  # forgotten while its engine ran: it moved
        return self._sent(live, live.outbox.send(out))

    async def _sent(self, live: LiveSession, sending: Awaitable[bool]) -> None:
        if not await sending and self._live.get(live.session.sid) is live:
            self._forget(live.session.sid)

    async def _finish_ended(self, lives: list[LiveSession]) -> list[Record]:
        """Finish those of ``lives`` whose end came and whose work is all done:
        their transcript and completion out, then closed. Returns their held
        records, free to commit."""
        free: list[Record] = []
        for live in lives:
            session = live.session
            if not live.ending or live.closing or not self._scheduler.idle(session):
                continue
            live.closing = True
            finished = self._send(session, session.finish())
            _, closed = await asyncio.gather(finished, live.outbox.close(session.resume_point()))
            if closed:  # else it moved: its new owner finishes it
                free += self._close(live)
        return free

    def _close(self, live: LiveSession) -> list[Record]:
        """The session is done and says so in its checkpoint: forget it here.
        Returns its held records, free to commit."""
        sid = live.session.sid
        if self._archiver is not None and live.archive is not None:
            redaction = None
            if live.redact is not RedactMode.OFF:
                finals = live.session.resume_point().finals
                redaction = Redaction(finals, keep_original=live.keep_original_audio)
            self._archiver.finish(sid, live.archive.take() + live.archive.flush(), redaction)
        if self._live.get(sid) is live:
            self._forget(sid)
        self._done.add(sid)
        return [record for _, record in live.held]

    def _wake_engines(self, *, but: int | None = None) -> None:
        """Wake the engine loops (not ``but``'s): work may wait for them."""
        for slot, wake in enumerate(self._wakes):
            if slot != but:
                wake.set()

    def _archive(self, live: LiveSession) -> None:
        """Hand the parts of audio that filled up to the archive: a redacted
        stream's once its finals are settled past them, silenced where they
        redact (:mod:`voxwire.workers.stream.archive`)."""
        if self._archiver is None or live.archive is None or not live.archive.ready:
            return
        if live.redact is RedactMode.OFF or live.keep_original_audio:
            parts = live.archive.take()
        else:
            point = live.session.resume_point()
            taken = live.archive.take(point.stream_sample)
            parts = [silenced_part(part, point.finals) for part in taken]
        self._archiver.write(live.session.sid, parts)

    def _owns_partition(self, partition: int) -> bool:
        subscription = self._subscription
        return subscription is None or subscription.owns(partition)

    def _owns(self, sid: str) -> bool:
        live = self._live.get(sid)
        return live is None or self._owns_partition(live.partition)

    def _forget(self, sid: str) -> None:
        """Drop a session that is done here, or went to another worker (its
        records still held are then the new owner's to commit)."""
        if not self._owns(sid):
            log.info("stream %s moved to another worker", sid)
        self._live.pop(sid, None)
        self._scheduler.forget(sid)
        LIVE_STREAMS.set(len(self._live))

    def _settled_records(self) -> list[Record]:
        """Held records whose audio is settled, released."""
        out: list[Record] = []
        for live in self._live.values():
            settled = live.outbox.settled
            if settled is None:
                continue
            out += [record for chunk, record in live.held if chunk < settled]
            live.held = [(chunk, record) for chunk, record in live.held if chunk >= settled]
        return out


def _addressed(
    body: PromptUpdate | ClientPublish,
) -> tuple[str | None, int | None, bytes | PromptChange]:
    """The session an audio record is for (None: no audio topic), its chunk
    (None: a control message) and what it carries."""
    if isinstance(body, PromptUpdate):  # from the HTTP API: as a device's change
        return body.sid, None, body.change
    try:
        audio = parse_audio_topic(body.topic)
    except ValueError:
        return None, None, body.payload
    return audio.sid, audio.chunk, body.payload


def parse_control(payload: bytes, sid: str) -> StreamControl | PromptChange:
    """What a device's ``audio/<sid>/control`` message asks: the end of the
    stream, a flush of its open utterance, or a change of its standing prompts.
    Raises :class:`InvalidChunkError`."""
    try:
        body = json.loads(payload)
        kind = body.get("type")
    except (ValueError, AttributeError):
        kind = None
    if kind in tuple(StreamControl):
        return StreamControl(kind)
    if kind == "prompts":
        try:
            return PromptChange.model_validate(body)
        except ValidationError as exc:
            raise InvalidChunkError(
                f"unusable prompt change: {exc.errors()[0]['msg']}", sid=sid
            ) from exc
    raise InvalidChunkError(
        'control messages are JSON: {"type": "end"}, {"type": "flush"} or {"type": "prompts", ...}',
        sid=sid,
    )


async def _nothing() -> None:
    pass
