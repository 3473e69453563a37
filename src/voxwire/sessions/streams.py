"""Starting a live stream: the session, its topic access, and the start record
that tells a stream worker how to transcribe it. Independent of HTTP."""

from __future__ import annotations

from voxwire.access.control import AccessControl
from voxwire.access.keys import KeyGrant
from voxwire.access.quotas import Ask
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import ConflictError
from voxwire.sessions.opening import announce, open_session, stored
from voxwire.sessions.options import check_prompts, resolve
from voxwire.sessions.pools import PoolCheck
from voxwire.sessions.quotas import QuotaGuard
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.wire.pools import Lane
from voxwire.wire.records import GATEWAY_SEQ, PromptUpdate, StreamStart
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.api import PromptChange, StreamRequest
from voxwire_client.messages import ProgressMessage, SessionStatus


class StreamService:
    def __init__(
        self,
        store: Store,
        bus: Bus,
        access: AccessControl,
        settings: Settings,
        pools: PoolCheck | None = None,
        quotas: QuotaGuard | None = None,
    ) -> None:
        """``pools``: asks whether a worker runs the stream's model (None: not asked);
        ``quotas``: the tenants' quotas (None: a guard of its own on ``store``)."""
        self._store = store
        self._bus = bus
        self._access = access
        self._settings = settings
        self._pools = pools
        self._quotas = quotas or QuotaGuard(store)

    async def start(
        self,
        tenant: Tenant,
        request: StreamRequest,
        *,
        sid: str | None = None,
        key: KeyGrant | None = None,
    ) -> SessionRecord:
        """Open the stream, recording ``key`` as the key that opened it; with ``sid``
        (a request asked again: at least once delivery) a session of ``tenant`` that
        has it already is answered as is while it runs (once it has ended, a
        ConflictError)."""
        if sid is not None:
            existing = await self._store.get_session(sid)
            if existing is not None and existing.tenant_id == tenant.id:
                if existing.status.terminal:
                    raise ConflictError(
                        f"this request already opened a stream, which has ended "
                        f"({existing.status.value})",
                        hint="ask with a new qid to open another stream",
                        sid=sid,
                    )
                return existing
        options = resolve(self._settings, tenant.name, request)
        if self._pools is not None:
            await self._pools.require(options.model, Lane.STREAMS)
        request = request.model_copy(update=dict(options))
        async with self._quotas.admit(tenant.id, key.key_id if key else None, Ask("live")):
            sid = await open_session(
                self._store,
                self._access,
                tenant,
                prompts=request.prompts,
                sid=sid,
                key=key,
                redact=options.redact,
                kind="live",
            )
        start = StreamStart(sid=sid, tenant_id=tenant.id, request=request)
        await self._bus.produce(AUDIO_TOPIC, sid, start.encode())
        queued = ProgressMessage(sid=sid, seq=GATEWAY_SEQ, status=SessionStatus.QUEUED, percent=0)
        await announce(self._store, self._bus, queued)
        return await stored(self._store, sid)

    async def change_prompts(self, session: SessionRecord, change: PromptChange) -> None:
        """Send a prompt change to the worker of a live stream, in order with its
        audio. The worker answers a change it cannot apply with an error message
        on the session's topics; what can be checked here is checked first."""
        if session.filename is not None:
            raise ConflictError(
                "the prompts of an uploaded file are fixed when it is uploaded",
                hint="prompts can be changed while a live stream runs",
                sid=session.sid,
            )
        if session.status.terminal:
            raise ConflictError(
                f"the stream has ended ({session.status.value})",
                hint="search its transcript instead: POST /v1/search",
                sid=session.sid,
            )
        check_prompts(change.add)
        update = PromptUpdate(sid=session.sid, change=change)
        await self._bus.produce(AUDIO_TOPIC, session.sid, update.encode())
