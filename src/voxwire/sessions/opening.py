"""What every new session needs, whether it is an upload or a live stream:
its record, its topics opened to its tenant, and its first message."""

from __future__ import annotations

from datetime import UTC, datetime

from voxwire.access.control import AccessControl
from voxwire.access.keys import KeyGrant
from voxwire.bus import Bus
from voxwire.core.errors import VoxwireError
from voxwire.store import SessionRecord, Store, Tenant
from voxwire.store.base import SessionKind
from voxwire.wire.records import GATEWAY_SEQ
from voxwire.wire.topics import RESULTS_TOPIC
from voxwire_client.api import PromptSpec, RedactMode
from voxwire_client.messages import ErrorMessage, Message, SessionStatus, encode_message
from voxwire_client.topics import new_sid


async def open_session(
    store: Store,
    access: AccessControl,
    tenant: Tenant,
    *,
    prompts: tuple[PromptSpec, ...],
    filename: str | None = None,
    sid: str | None = None,
    key: KeyGrant | None = None,
    redact: RedactMode | None = None,
    kind: SessionKind = "file",
) -> str:
    """Create a queued session of ``tenant`` (``sid``: its id, else a new one),
    opened with ``key`` (recorded), and let the tenant reach its topics (and a
    device key that opened it). A session whose topics cannot be opened (the
    broker restarting) is failed in the store, with the error, before the error
    is raised: it never stays queued with nothing to run it."""
    sid = sid or new_sid()
    await store.create_session(
        SessionRecord(
            sid=sid,
            tenant_id=tenant.id,
            status=SessionStatus.QUEUED,
            created_at=datetime.now(UTC),
            filename=filename,
            prompts=prompts,
            key_id=key.key_id if key else None,
            kind=kind,
        ),
        redact,
    )
    try:
        await access.grant_session(tenant.id, sid, key.key_id if key and key.device else None)
    except VoxwireError as exc:
        exc.sid = sid
        failed = ErrorMessage(
            sid=sid, seq=GATEWAY_SEQ, code=exc.code, message=exc.message, hint=exc.hint
        )
        await store.record_message(failed)
        raise
    return sid


async def announce(store: Store, bus: Bus, message: Message) -> None:
    """Record a message the gateway itself publishes (before any worker) and send it
    through the relay like every other."""
    await store.record_message(message)
    await bus.produce(RESULTS_TOPIC, message.sid, encode_message(message))


async def stored(store: Store, sid: str) -> SessionRecord:
    session = await store.get_session(sid)
    assert session is not None, f"session {sid} vanished"
    return session
