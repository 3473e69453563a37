"""Re-transcription: a finished session's stored audio transcribed again, as its
next transcript version (:mod:`voxwire_client.versions`).

:meth:`RetranscribeService.start` checks the request (a model the platform
serves, else a 400 that lists them; a language that model speaks), makes sure
the session's audio is stored (uploads keep it; live streams archive theirs,
:mod:`voxwire.workers.stream.archive`), then reopens the session in the store in
one step (finished -> ``queued``, ``version`` + 1; a session that is still
being transcribed is a 409), publishes the ``queued`` progress of the new
version and puts the job on ``transcription.rejobs``, the low-priority lane.

``seq`` goes on after the session's last message: the ``queued`` progress takes
``last_seq + 1`` and the job starts at ``last_seq + 2``. Nothing else writes to
a finished session, and only one re-transcription of a session runs at a time
(the reopening is atomic), so no two writers share a ``seq``.

The new version keeps the session's redaction (recorded when it was opened; the
tenant's or platform's default for sessions opened before it was recorded), and
runs without the session's prompts: the matches stay those of version 1. A
redacted session's stored audio has its redacted spans silenced
(:mod:`voxwire.sessions.audio`): the new version is transcribed from that, never
from a kept original, and its answer says so (``redacted_audio``).

A session uploaded with separate channels is transcribed again channel by
channel, with its labels, while its tracks are stored
(:mod:`voxwire.sessions.retranscribe_channels`); otherwise the mix is.
"""

from __future__ import annotations

import asyncio

from voxwire.access.quotas import Ask
from voxwire.blobs import BlobStore
from voxwire.bus import Bus
from voxwire.core.config import Settings
from voxwire.core.errors import ConflictError, NotFoundError
from voxwire.sessions.audio import AUDIO_BLOB, read_redaction
from voxwire.sessions.options import resolve
from voxwire.sessions.pools import PoolCheck
from voxwire.sessions.quotas import QuotaGuard
from voxwire.sessions.retranscribe_channels import channels_again
from voxwire.store import SessionRecord, Store
from voxwire.wire.pools import Lane
from voxwire.wire.records import FileJob
from voxwire.wire.topics import REJOBS_TOPIC, RESULTS_TOPIC
from voxwire_client.messages import ProgressMessage, SessionStatus, encode_message
from voxwire_client.options import ChannelMode
from voxwire_client.versions import RetranscribeAccepted, RetranscribeRequest

_BYTES_PER_MS = 32  # 16 samples of 2 bytes


class RetranscribeService:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        bus: Bus,
        blobs: BlobStore,
        pools: PoolCheck | None = None,
        quotas: QuotaGuard | None = None,
    ) -> None:
        """``pools``: asks whether a worker runs the model (None: not asked);
        ``quotas``: the tenants' quotas (None: a guard of its own on ``store``)."""
        self._settings = settings
        self._store = store
        self._bus = bus
        self._blobs = blobs
        self._pools = pools
        self._quotas = quotas or QuotaGuard(store)

    async def start(
        self, session: SessionRecord, tenant_name: str, request: RetranscribeRequest
    ) -> RetranscribeAccepted:
        """Queue the next version of ``session`` (see the module doc)."""
        sid = session.sid
        channels = await channels_again(self._blobs, self._store, sid, request)
        update: dict[str, object] = {"language": request.language or session.language}
        if channels.track_keys:
            update |= {"channels": ChannelMode.SEPARATE, "channel_labels": channels.labels}
        else:
            update |= {"channels": ChannelMode.MIXED, "channel_labels": None}
        options = resolve(self._settings, tenant_name, request.model_copy(update=update))
        if self._pools is not None:
            await self._pools.require(options.model, Lane.AGAIN)
        stored = await asyncio.to_thread(self._blobs.names, sid, AUDIO_BLOB)
        if AUDIO_BLOB not in stored:
            raise NotFoundError(
                "no stored audio for this session",
                hint="sessions keep their audio from this version on: uploads, and live "
                "streams once they have ended",
                sid=sid,
            )
        ask = Ask("retranscription")
        async with self._quotas.admit(session.tenant_id, session.key_id, ask):
            opened = await self._store.reopen_session(sid)
        if opened is None:
            raise ConflictError(
                f"the session is {session.status.value}: it can be transcribed again "
                "once it has completed or failed",
                hint="wait for its transcript (or the re-transcription under way)",
                sid=sid,
            )
        reopened = opened.session
        redact = opened.redact or self._settings.security.redact_for(tenant_name, None)
        first_seq = reopened.last_seq + 1
        duration_ms = stored[AUDIO_BLOB] // _BYTES_PER_MS
        queued = ProgressMessage(
            sid=sid,
            seq=first_seq,
            version=reopened.version,
            status=SessionStatus.QUEUED,
            percent=0,
            duration_ms=duration_ms,
        )
        await self._bus.produce(RESULTS_TOPIC, sid, encode_message(queued))
        job = FileJob(
            **{**dict(options), "redact": redact},
            sid=sid,
            tenant_id=reopened.tenant_id,
            audio_key=self._blobs.key(sid, AUDIO_BLOB),
            track_keys=channels.track_keys,
            duration_ms=duration_ms,
            first_seq=first_seq + 1,
            version=reopened.version,
        )
        await self._bus.produce(REJOBS_TOPIC, sid, job.encode())
        redacted = await asyncio.to_thread(read_redaction, self._blobs, sid)
        return RetranscribeAccepted(
            sid=sid,
            version=reopened.version,
            model=options.model,
            first_seq=first_seq,
            redacted_audio=redacted is not None,
        )
