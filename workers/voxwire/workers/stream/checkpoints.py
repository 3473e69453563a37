"""Where live streams stand, saved before each message they emit.

A stream worker saves a :class:`StreamCheckpoint` for a session before it
hands the session's messages to the bus (a write-ahead record,
:mod:`voxwire.workers.stream.outbox`): the session's start record, the first
message, the others decided with it (``pending``) and the :class:`Resume`
point after them. A worker that takes the session over after a crash loads
the checkpoint, sends the message again and replays the pending ones (the
store and clients drop repeats by ``seq``), and goes on from the resume point
with the audio still in the Kafka log.

:class:`RedisCheckpoints` keeps them in Redis (distributed mode), one key per
session (``<prefix>:stream:<sid>``, expiring ``ttl_s`` after the last save);
:class:`MemoryCheckpoints` in the process (embedded mode, where no other
worker could take over). A Redis that restarts (a rolling update, a failover)
is waited out: a command that meets a dropped or refused connection is tried
again with backoff (:data:`REDIS_RETRIES`), rather than failing the streams
of every worker, and ending the workers, at the first dropped connection.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

import redis.asyncio as aioredis
from pydantic import TypeAdapter
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import RedisError

from voxwire.core.errors import VoxwireError
from voxwire.workers.stream.session import Outbound, Resume
from voxwire_client.api import PromptSpec
from voxwire_client.messages import Message, SegmentData, encode_message, parse_message

_FINALS = TypeAdapter(tuple[SegmentData, ...])
_PROMPTS = TypeAdapter(tuple[PromptSpec, ...])
DEFAULT_TTL_S = 24 * 3600
REDIS_RETRIES = 14
"""Tries again of a command that met a connection or timeout error: with the
backoff (0.1 s doubling to 2 s) about 20 s, longer than a Redis restart."""


class CheckpointError(VoxwireError):
    """The checkpoint store failed or holds something unreadable."""

    code = "checkpoint"


@dataclass(frozen=True, slots=True)
class StreamCheckpoint:
    start: bytes
    """The session's start record (:class:`~voxwire.wire.records.StreamStart`)."""
    resume: Resume
    last: Message | None = None
    """The message saved with this checkpoint; maybe not yet on the bus."""
    done: bool = False
    """Every message of the session is on the bus: nothing to resume."""

    @classmethod
    def ahead_of(cls, start: bytes, out: Outbound) -> StreamCheckpoint:
        """The checkpoint to save before ``out``'s messages go out: the first
        as ``last`` (sent again by a successor), the others as ``pending``."""
        first, *rest = out.messages
        return cls(start, replace(out.resume, pending=tuple(rest)), first)

    def encode(self) -> bytes:
        r = self.resume
        body: dict[str, Any] = {
            "start": base64.b64encode(self.start).decode(),
            "next_seq": r.next_seq,
            "finals": json.loads(_FINALS.dump_json(r.finals)),
            "chunk": r.chunk,
            "skip_samples": r.skip_samples,
            "stream_sample": r.stream_sample,
            "pending": [encode_message(m).decode() for m in r.pending],
            "finished": r.finished,
            "prompts": None if r.prompts is None else [p.model_dump() for p in r.prompts],
            "speakers": [list(s) for s in r.speakers],
            "tracks": list(r.tracks),
            "early": [None if e is None else list(e) for e in r.early],
            "last": encode_message(self.last).decode() if self.last else None,
            "done": self.done,
        }
        return json.dumps(body).encode()

    @classmethod
    def decode(cls, data: bytes) -> StreamCheckpoint:
        try:
            body = json.loads(data)
            resume = Resume(
                next_seq=int(body["next_seq"]),
                finals=_FINALS.validate_python(body["finals"]),
                chunk=int(body["chunk"]),
                skip_samples=int(body["skip_samples"]),
                stream_sample=int(body["stream_sample"]),
                pending=tuple(parse_message(m) for m in body["pending"]),
                finished=bool(body["finished"]),
                prompts=None
                if body.get("prompts") is None
                else _PROMPTS.validate_python(body["prompts"]),
                speakers=tuple(
                    (str(label), tuple(float(x) for x in total), float(weight))
                    for label, total, weight in body.get("speakers", ())
                ),
                tracks=tuple(int(t) for t in body.get("tracks", ())),
                early=tuple(
                    None if e is None else (int(e[0]), int(e[1])) for e in body.get("early", ())
                ),
            )
            last = parse_message(body["last"]) if body["last"] else None
            return cls(base64.b64decode(body["start"]), resume, last, bool(body["done"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"unreadable stream checkpoint: {exc}") from exc


class Checkpoints(Protocol):
    async def save(self, sid: str, checkpoint: StreamCheckpoint) -> None: ...

    async def load(self, sid: str) -> StreamCheckpoint | None: ...

    async def forget(self, sid: str) -> None:
        """Remove the session's checkpoint (a deleted session); none is fine."""
        ...

    async def close(self) -> None: ...


class MemoryCheckpoints:
    def __init__(self) -> None:
        self._saved: dict[str, StreamCheckpoint] = {}

    async def save(self, sid: str, checkpoint: StreamCheckpoint) -> None:
        self._saved[sid] = checkpoint

    async def load(self, sid: str) -> StreamCheckpoint | None:
        return self._saved.get(sid)

    async def forget(self, sid: str) -> None:
        self._saved.pop(sid, None)

    async def close(self) -> None:
        self._saved.clear()


class RedisCheckpoints:
    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "vx",
        ttl_s: int = DEFAULT_TTL_S,
        probe: aioredis.Redis | None = None,
    ):
        """``probe``: the client :meth:`ping` uses (default ``client``), one that
        does not try again, so readiness says at once why Redis does not answer."""
        self._redis = client
        self._probe = probe or client
        self._prefix = prefix
        self._ttl_s = ttl_s

    @classmethod
    def open(
        cls, url: str, *, prefix: str = "vx", ttl_s: int = DEFAULT_TTL_S, timeout: float = 5.0
    ) -> RedisCheckpoints:
        """Checkpoints on the Redis at ``url``; connections are made lazily."""
        client = aioredis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), REDIS_RETRIES),
        )
        probe = aioredis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )
        return cls(client, prefix=prefix, ttl_s=ttl_s, probe=probe)

    def key(self, sid: str) -> str:
        return f"{self._prefix}:stream:{sid}"

    async def save(self, sid: str, checkpoint: StreamCheckpoint) -> None:
        try:
            await self._redis.set(self.key(sid), checkpoint.encode(), ex=self._ttl_s)
        except RedisError as exc:
            raise CheckpointError(f"Redis: {exc}", hint="check VOXWIRE_REDIS_URL") from exc

    async def load(self, sid: str) -> StreamCheckpoint | None:
        try:
            data: bytes | str | None = await self._redis.get(self.key(sid))
        except RedisError as exc:
            raise CheckpointError(f"Redis: {exc}", hint="check VOXWIRE_REDIS_URL") from exc
        if data is None:
            return None
        return StreamCheckpoint.decode(data.encode() if isinstance(data, str) else data)

    async def forget(self, sid: str) -> None:
        try:
            await self._redis.delete(self.key(sid))
        except RedisError as exc:
            raise CheckpointError(f"Redis: {exc}", hint="check VOXWIRE_REDIS_URL") from exc

    async def ping(self) -> None:
        """A round trip to Redis, not tried again (readiness)."""
        try:
            await self._probe.ping()
        except RedisError as exc:
            raise CheckpointError(f"Redis: {exc}", hint="check VOXWIRE_REDIS_URL") from exc

    async def close(self) -> None:
        await self._redis.aclose()
        if self._probe is not self._redis:
            await self._probe.aclose()
