"""Starting a live stream: the session, its topic access, and the start record
that tells a stream worker how to transcribe it. Independent of HTTP."""

from __future__ import annotations

from voxwire.bridge.ingest import envelope
from voxwire.broker.dynsec import AccessControl
from voxwire.bus import Bus
from voxwire.gateway.sessions import announce, open_session, stored
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.workers.stream_worker import AUDIO_TOPIC, StreamStart
from voxwire_client.api import StreamRequest
from voxwire_client.messages import ProgressMessage, SessionStatus


class StreamService:
    def __init__(self, store: Store, bus: Bus, access: AccessControl) -> None:
        self._store = store
        self._bus = bus
        self._access = access

    async def start(self, tenant: Tenant, request: StreamRequest) -> SessionRecord:
        sid = await open_session(self._store, self._access, tenant, prompts=request.prompts)
        start = StreamStart(sid=sid, tenant_id=tenant.id, request=request)
        await self._bus.produce(
            AUDIO_TOPIC, sid, envelope(f"stream/{sid}/start", start.encode(), origin="gateway")
        )
        queued = ProgressMessage(sid=sid, seq=1, status=SessionStatus.QUEUED, percent=0)
        await announce(self._store, self._bus, queued)
        return await stored(self._store, sid)
