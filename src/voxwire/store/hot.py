"""Hot session state on Redis: status, percent and last seq, for fast status reads.

PostgreSQL stays the source of truth; this is a cache the relay keeps warm from
the messages it relays (:meth:`HotState.apply`, or :meth:`HotState.apply_many`
for a whole batch in two round trips) and the gateway reads
(:meth:`HotState.get`) without touching the database. Keys (``vx`` is the
configurable prefix)::

    vx:session:<sid>     hash: tenant_id, status, percent, last_seq, status_seq, updated_ms
                         expires ``ttl_s`` (24 h) after its last update
    vx:active:<tenant>   sorted set: sids of the tenant's running sessions, scored by
                         the time of their last status change (ms); a session leaves it
                         when it completes or fails

Updating a session hash is one Lua script, so it is atomic and idempotent: a
redelivered message (same ``seq``) writes the same values again, and a status
older than the stored one (lower ``seq``) never overwrites it. The active set is a separate key
(another Redis Cluster slot), updated after the script from what it returns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from voxwire.core.errors import VoxwireError
from voxwire.store.base import SessionRecord
from voxwire_client.messages import ErrorMessage, Message, ProgressMessage, SessionStatus

DEFAULT_TTL_S = 24 * 3600

# KEYS[1] session hash; ARGV: seq, status ('' = no status change), percent ('' = keep),
# ttl_s, now_ms, tenant_id ('' = unknown). Returns {status_changed, tenant_id, status}.
_APPLY = """
local key = KEYS[1]
local seq = tonumber(ARGV[1])
if seq > tonumber(redis.call('HGET', key, 'last_seq') or '0') then
  redis.call('HSET', key, 'last_seq', seq)
end
local changed = 0
if ARGV[2] ~= '' and seq >= tonumber(redis.call('HGET', key, 'status_seq') or '0') then
  redis.call('HSET', key, 'status', ARGV[2], 'status_seq', seq)
  if ARGV[3] ~= '' then redis.call('HSET', key, 'percent', ARGV[3]) end
  changed = 1
end
if ARGV[6] ~= '' then redis.call('HSET', key, 'tenant_id', ARGV[6]) end
redis.call('HSETNX', key, 'status', 'queued')
redis.call('HSETNX', key, 'percent', '0')
redis.call('HSET', key, 'updated_ms', ARGV[5])
redis.call('EXPIRE', key, tonumber(ARGV[4]))
return {changed, redis.call('HGET', key, 'tenant_id') or '', redis.call('HGET', key, 'status')}
"""


class HotStateError(VoxwireError):
    """Redis failed or is unreachable."""

    code = "hot_state"


@dataclass(frozen=True, slots=True)
class HotSession:
    """What the hot state knows about one session."""

    sid: str
    status: SessionStatus
    percent: float
    last_seq: int
    tenant_id: str | None = None
    updated_ms: int = 0


class HotState:
    """Per-session status on Redis; open with :meth:`open`, or wrap a client."""

    def __init__(
        self, client: aioredis.Redis, *, ttl_s: int = DEFAULT_TTL_S, prefix: str = "vx"
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self._prefix = prefix
        self._apply_script = client.register_script(_APPLY)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        ttl_s: int = DEFAULT_TTL_S,
        prefix: str = "vx",
        timeout: float = 5.0,
    ) -> HotState:
        """A hot state on the Redis at ``url`` (``redis://:password@host:port/db``).

        Connections are made lazily; call :meth:`ping` to check the server.
        """
        client = aioredis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=30,
        )
        return cls(client, ttl_s=ttl_s, prefix=prefix)

    @property
    def ttl_s(self) -> int:
        return self._ttl_s

    def session_key(self, sid: str) -> str:
        return f"{self._prefix}:session:{sid}"

    def active_key(self, tenant_id: str) -> str:
        return f"{self._prefix}:active:{tenant_id}"

    async def ping(self) -> None:
        await self._call(self._redis.ping())

    async def track(self, session: SessionRecord) -> None:
        """Start tracking a new session (its tenant and initial status)."""
        update = _Update(
            session.sid, session.last_seq, session.status, session.percent, session.tenant_id
        )
        await self._run([update])

    async def apply(self, message: Message, tenant_id: str | None = None) -> None:
        """Fold one message into the session's hot state (idempotent by ``seq``)."""
        await self._run([_update_of(message, tenant_id)])

    async def apply_many(self, messages: Sequence[Message], tenant_id: str | None = None) -> None:
        """Fold a batch of messages, in order, in two round trips.

        Only the messages that can decide the outcome are sent: per session the
        latest progress, the latest status change and the highest ``seq``.
        """
        updates = [_update_of(m, tenant_id) for m in messages]
        deciding: dict[tuple[str, str], int] = {}  # (sid, role) -> index in updates
        for i, u in enumerate(updates):
            roles = ["seq"]
            if u.status is not None:
                roles.append("status")
            if u.percent is not None:
                roles.append("progress")
            for role in roles:
                best = deciding.get((u.sid, role))
                if best is None or u.seq >= updates[best].seq:
                    deciding[(u.sid, role)] = i
        await self._run([updates[i] for i in sorted(set(deciding.values()))])

    async def get(self, sid: str) -> HotSession | None:
        """The session's hot state, or None when unknown or expired."""
        fields: dict[str, str] = await self._call(self._redis.hgetall(self.session_key(sid)))
        if not fields:
            return None
        return HotSession(
            sid=sid,
            status=SessionStatus(fields.get("status", SessionStatus.QUEUED.value)),
            percent=float(fields.get("percent", 0)),
            last_seq=int(fields.get("last_seq", 0)),
            tenant_id=fields.get("tenant_id") or None,
            updated_ms=int(fields.get("updated_ms", 0)),
        )

    async def active(self, tenant_id: str) -> list[str]:
        """Sids of the tenant's running sessions, the most recently updated first."""
        key = self.active_key(tenant_id)
        stale_before = _now_ms() - self._ttl_s * 1000
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", f"({stale_before}")
            pipe.zrevrange(key, 0, -1)
            results: list[Any] = await self._call(pipe.execute())
        return [str(sid) for sid in results[1]]

    async def forget(self, sid: str) -> None:
        """Drop a session's hot state (and its place in its tenant's active set)."""
        hot = await self.get(sid)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.delete(self.session_key(sid))
            if hot and hot.tenant_id:
                pipe.zrem(self.active_key(hot.tenant_id), sid)
            await self._call(pipe.execute())

    async def close(self) -> None:
        await self._redis.aclose()

    async def _run(self, updates: Sequence[_Update]) -> None:
        if not updates:
            return
        now = _now_ms()
        async with self._redis.pipeline(transaction=False) as pipe:
            for u in updates:
                args = [
                    u.seq,
                    u.status.value if u.status else "",
                    "" if u.percent is None else repr(float(u.percent)),
                    self._ttl_s,
                    now,
                    u.tenant_id or "",
                ]
                await self._apply_script(keys=[self.session_key(u.sid)], args=args, client=pipe)
            results: list[Any] = await self._call(pipe.execute())
        touched: set[str] = set()
        async with self._redis.pipeline(transaction=False) as pipe:
            for update, (changed, owner, current) in zip(updates, results, strict=True):
                if not (int(changed) and owner):
                    continue
                active = self.active_key(str(owner))
                if SessionStatus(current).terminal:
                    pipe.zrem(active, update.sid)
                else:
                    pipe.zadd(active, {update.sid: now})
                touched.add(active)
            for active in touched:
                pipe.expire(active, self._ttl_s)
            if touched:
                await self._call(pipe.execute())

    @staticmethod
    async def _call(awaitable: Any) -> Any:
        try:
            return await awaitable
        except RedisError as exc:
            raise HotStateError(f"Redis: {exc}", hint="check VOXWIRE_REDIS_URL") from exc


@dataclass(frozen=True, slots=True)
class _Update:
    sid: str
    seq: int
    status: SessionStatus | None
    percent: float | None
    tenant_id: str | None


def _update_of(message: Message, tenant_id: str | None) -> _Update:
    if isinstance(message, ProgressMessage):
        return _Update(message.sid, message.seq, message.status, message.percent, tenant_id)
    if isinstance(message, ErrorMessage) and message.fatal:
        return _Update(message.sid, message.seq, SessionStatus.FAILED, None, tenant_id)
    return _Update(message.sid, message.seq, None, None, tenant_id)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
