"""Starting a live stream: the session, its topic access, and the start record
that tells a stream worker how to transcribe it. Independent of HTTP."""

from __future__ import annotations

from datetime import UTC, datetime

from voxwire.bridge.ingest import envelope
from voxwire.broker.dynsec import AccessControl
from voxwire.bus import RESULTS_TOPIC, Bus
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.workers.stream_worker import AUDIO_TOPIC, StreamStart
from voxwire_client.api import StreamRequest
from voxwire_client.messages import ProgressMessage, SessionStatus, encode_message
from voxwire_client.topics import new_sid


class StreamService:
    def __init__(self, store: Store, bus: Bus, access: AccessControl) -> None:
        self._store = store
        self._bus = bus
        self._access = access

    async def start(self, tenant: Tenant, request: StreamRequest) -> SessionRecord:
        sid = new_sid()
        session = SessionRecord(
            sid=sid,
            tenant_id=tenant.id,
            status=SessionStatus.QUEUED,
            created_at=datetime.now(UTC),
            filename=None,
            prompts=request.prompts,
        )
        await self._store.create_session(session)
        await self._access.grant_session(tenant.id, sid)
        start = StreamStart(sid=sid, tenant_id=tenant.id, request=request)
        await self._bus.produce(
            AUDIO_TOPIC, sid, envelope(f"stream/{sid}/start", start.encode(), origin="gateway")
        )
        queued = ProgressMessage(sid=sid, seq=1, status=SessionStatus.QUEUED, percent=0)
        await self._store.record_message(queued)
        await self._bus.produce(RESULTS_TOPIC, sid, encode_message(queued))
        stored = await self._store.get_session(sid)
        assert stored is not None
        return stored
