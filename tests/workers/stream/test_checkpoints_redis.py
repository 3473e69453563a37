"""Stream checkpoints on a Redis that restarts: the save in flight waits the
restart out instead of failing the stream (the chaos soak saw a Redis restart
end both workers with "Redis: Connection closed by server").

The restart is played by a TCP relay in front of the real Redis of
``scripts/services.sh``: it drops the connections it carries, then closes the
next few it accepts at once, as a Redis that is going down and coming back."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.store import redis_url, unavailable
from voxwire.workers.stream.checkpoints import RedisCheckpoints, StreamCheckpoint
from voxwire.workers.stream.session import Resume

pytestmark = pytest.mark.timeout(60)


class RestartingRedis:
    """A relay to Redis on a port of its own; :meth:`restart` drops what it
    carries and refuses the next ``refusing`` connections."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self._parts = parts
        self.refusing = 0
        self.refused = 0
        self._carried: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        auth = self._parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"
        return urlunsplit(self._parts._replace(netloc=netloc))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def restart(self, refusing: int) -> None:
        for writer in self._carried:
            writer.close()
        self._carried.clear()
        self.refusing = refusing

    async def close(self) -> None:
        self.restart(0)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.refusing -= 1
            self.refused += 1
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._carried += [writer, up_writer]
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def redis_relay() -> AsyncIterator[RestartingRedis]:
    url = redis_url()
    probe = aioredis.from_url(url)
    try:
        await probe.ping()
    except (RedisError, OSError) as exc:
        unavailable("redis", str(exc))
    finally:
        await probe.aclose()
    relay = RestartingRedis(url)
    await relay.start()
    yield relay
    await relay.close()


def checkpoint(chunk: int) -> StreamCheckpoint:
    return StreamCheckpoint(b"start", Resume(next_seq=chunk + 1, chunk=chunk))


async def test_a_save_waits_a_redis_restart_out(redis_relay: RestartingRedis) -> None:
    sid = "ck" + secrets.token_hex(4)
    checkpoints = RedisCheckpoints.open(redis_relay.url, prefix=f"vxtest{secrets.token_hex(3)}")
    try:
        await checkpoints.save(sid, checkpoint(1))
        redis_relay.restart(refusing=4)
        await checkpoints.save(sid, checkpoint(2))  # raised CheckpointError before
        assert redis_relay.refused == 4
        loaded = await checkpoints.load(sid)
        assert loaded is not None and loaded.resume.chunk == 2
    finally:
        await checkpoints.forget(sid)
        await checkpoints.close()
