"""What a client is told about a session, over HTTP or MQTT alike."""

from __future__ import annotations

from voxwire.core.config import Settings
from voxwire.store import SessionRecord, Store
from voxwire_client.api import Endpoints, SessionInfo, StreamCreated, TranscriptResponse
from voxwire_client.messages import Task
from voxwire_client.topics import audio_chunk_prefix, audio_control_topic, session_filter


def session_info(session: SessionRecord) -> SessionInfo:
    return SessionInfo(
        sid=session.sid,
        status=session.status,
        created_at=session.created_at,
        filename=session.filename,
        duration_ms=session.duration_ms,
        percent=session.percent,
        last_seq=session.last_seq,
        prompts=session.prompts,
        error_code=session.error_code,
        error_message=session.error_message,
    )


def endpoints(settings: Settings, sid: str) -> Endpoints:
    """Where a client subscribes to the session's messages."""
    mqtt_url, ws_url = settings.broker_urls
    return Endpoints(mqtt_url=mqtt_url, ws_url=ws_url, topic_filter=session_filter(sid))


def stream_created(settings: Settings, session: SessionRecord) -> StreamCreated:
    """The answer to a stream request: the session, and where its audio goes."""
    return StreamCreated(
        **session_info(session).model_dump(),
        endpoints=endpoints(settings, session.sid),
        audio_topic=audio_chunk_prefix(session.sid),
        control_topic=audio_control_topic(session.sid),
    )


async def transcript_of(store: Store, session: SessionRecord) -> TranscriptResponse:
    """The stored transcript: every final segment, and the matches of its prompts;
    its task is its segments' (a session without any: transcribe)."""
    segments = await store.segments(session.sid)
    return TranscriptResponse(
        sid=session.sid,
        status=session.status,
        text=session.text or " ".join(s.text for s in segments).strip(),
        language=session.language,
        duration_ms=session.duration_ms,
        segments=tuple(segments),
        matches=tuple(await store.matches(session.sid)),
        task=segments[0].task if segments else Task.TRANSCRIBE,
    )
