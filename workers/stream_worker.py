"""The stream worker: live sessions from the audio topic, transcribed as they speak.

Consumes ``transcription.audio`` (key = sid, so one session's start, chunks and
end arrive in order on one partition). Each record is the envelope the bridge
or the gateway wrote: ``{"topic", "payload" (base64), "origin"}``:

- ``stream/<sid>/start`` from the gateway (``origin`` "gateway"): the session's
  configuration; only the gateway may start a stream;
- ``audio/<sid>/chunk/<n>`` from a device: PCM16LE 16 kHz mono, chunk ``n``;
- ``audio/<sid>/control`` from a device: ``{"type": "end"}``.

Ingestion (VAD and endpointing) runs on the event loop and only queues work;
one engine thread transcribes the queued work of every session in turn, so a
slow transcription never holds up audio. Bad chunks get a non-fatal error
message on their session and never touch other sessions.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pydantic import ValidationError

from voxwire.bus import RESULTS_TOPIC, Bus, Record
from voxwire.errors import AudioError, VoxwireError
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.stream_pipeline import StreamConfig, StreamSession
from voxwire.workers.vad import SileroVad, Vad
from voxwire_client.api import StreamRequest
from voxwire_client.messages import Message, encode_message
from voxwire_client.topics import parse_audio_topic

log = logging.getLogger(__name__)

AUDIO_TOPIC = "transcription.audio"
STREAM_GROUP = "voxwire-streams"


class InvalidChunkError(AudioError):
    code = "invalid_chunk"


@dataclass(frozen=True, slots=True)
class StreamStart:
    """What the gateway hands the worker to open a stream."""

    sid: str
    tenant_id: str
    request: StreamRequest

    def encode(self) -> bytes:
        body = {
            "sid": self.sid,
            "tenant_id": self.tenant_id,
            "request": self.request.model_dump(mode="json"),
        }
        return json.dumps(body).encode()

    @classmethod
    def decode(cls, data: bytes) -> StreamStart:
        body = json.loads(data)
        return cls(body["sid"], body["tenant_id"], StreamRequest.model_validate(body["request"]))


class StreamWorker:
    def __init__(
        self,
        bus: Bus,
        engine: Engine,
        options: EngineOptions,
        *,
        vad_factory: Callable[[], Vad] = SileroVad,
        group: str = STREAM_GROUP,
    ) -> None:
        self._bus = bus
        self._engine = engine
        self._options = options
        self._vad_factory = vad_factory
        self._group = group
        self._sessions: dict[str, StreamSession] = {}
        self._ending: set[str] = set()
        # errors found while ingesting, emitted by the engine thread: emitting
        # waits on the bus, which the event loop thread must never do
        self._errors: list[tuple[StreamSession, VoxwireError]] = []
        self._errors_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stream-engine")
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ignored = 0

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        subscription = self._bus.subscribe(AUDIO_TOPIC, self._group)
        engine_task = asyncio.create_task(self._engine_loop())
        try:
            while True:
                records = await subscription.next_batch(200)
                for record in records:
                    self._handle(record)
                self._wake.set()
                await subscription.commit(*records)
        finally:
            engine_task.cancel()
            await asyncio.gather(engine_task, return_exceptions=True)
            await subscription.close()
            self._pool.shutdown(wait=False)

    # -- ingestion (event loop) ----------------------------------------------------------

    def _handle(self, record: Record) -> None:
        try:
            body = json.loads(record.value)
            topic, payload = str(body["topic"]), base64.b64decode(body["payload"], validate=True)
            origin = body.get("origin", "mqtt")
        except (ValueError, KeyError, TypeError, binascii.Error):
            log.warning("stream worker: malformed audio record (key %s)", record.key)
            return
        if topic.startswith("stream/") and origin == "gateway":
            self._start(payload)
            return
        session = self._sessions.get(record.key)
        try:
            audio = parse_audio_topic(topic)
        except ValueError:
            audio = None
        if session is None or audio is None or audio.sid != record.key or audio.sid in self._ending:
            self.ignored += 1  # unknown, ended or foreign session: nothing to attach it to
            return
        now = time.monotonic()
        try:
            if audio.chunk is not None:
                session.push(audio.chunk, payload, now)
            else:
                self._control(record.key, session, payload, now)
        except VoxwireError as exc:
            with self._errors_lock:
                self._errors.append((session, exc))

    def _start(self, payload: bytes) -> None:
        try:
            start = StreamStart.decode(payload)
            request = start.request
            config = StreamConfig(**request.model_dump(exclude={"prompts"}))
        except (ValueError, KeyError, ValidationError, VoxwireError) as exc:
            log.error("stream worker: unusable stream start: %s", exc)
            return
        if start.sid in self._sessions:
            return  # a redelivered start
        self._sessions[start.sid] = StreamSession(
            start.sid,
            self._engine,
            self._options,
            config,
            request.prompts,
            self._emit,
            vad=self._vad_factory(),
            now=time.monotonic,
        )

    def _control(self, sid: str, session: StreamSession, payload: bytes, now: float) -> None:
        try:
            kind = json.loads(payload).get("type")
        except (ValueError, AttributeError):
            kind = None
        if kind != "end":
            raise InvalidChunkError('control messages are JSON such as {"type": "end"}', sid=sid)
        session.end(now)
        self._ending.add(sid)

    # -- transcription (engine thread) ---------------------------------------------------

    def _emit(self, message: Message) -> None:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(
            self._bus.produce(RESULTS_TOPIC, message.sid, encode_message(message)), self._loop
        )
        future.result()

    async def _engine_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            finished = await loop.run_in_executor(self._pool, self._drain)
            for sid in finished:
                self._sessions.pop(sid, None)
                self._ending.discard(sid)

    def _drain(self) -> list[str]:
        """Transcribe what every session has queued; finish ended sessions."""
        with self._errors_lock:
            errors, self._errors = self._errors, []
        for session, exc in errors:
            session.error(exc)
        finished = []
        for sid, session in list(self._sessions.items()):
            try:
                session.run_pending()
                if sid in self._ending:
                    session.finish()
                    finished.append(sid)
            except Exception:
                log.exception("stream %s failed", sid)
                finished.append(sid)
        return finished
