"""What a client is told about a session, over HTTP or MQTT alike."""

from __future__ import annotations

from voxwire.core.config import Settings
from voxwire.core.errors import NotFoundError
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
        version=session.version,
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


async def transcript_of(
    store: Store, session: SessionRecord, version: int | None = None
) -> TranscriptResponse:
    """The stored transcript: every final segment, and the matches of its prompts
    (version 1's: a re-transcription matches none). ``version``: that version's,
    kept when a later one replaced it (None: the current one, the latest
    published); NotFoundError for a version never published. Its task is its
    segments' (a transcript without any: transcribe)."""
    published = await store.transcript_versions(session.sid)
    versions = tuple(t.version for t in published) or (1,)
    current = max(versions)
    matches = tuple(await store.matches(session.sid))
    if version is None or version == current:
        segments = await store.segments(session.sid)
        return TranscriptResponse(
            sid=session.sid,
            status=session.status,
            text=session.text or " ".join(s.text for s in segments).strip(),
            language=session.language,
            duration_ms=session.duration_ms,
            segments=tuple(segments),
            matches=matches if current == 1 else (),
            version=current,
            versions=versions,
            task=segments[0].task if segments else Task.TRANSCRIBE,
        )
    old = next((t for t in published if t.version == version), None)
    if old is None:
        raise NotFoundError(
            f"no transcript version {version} of session {session.sid}",
            hint=f"versions kept: {', '.join(map(str, versions))}",
            sid=session.sid,
        )
    return TranscriptResponse(
        sid=session.sid,
        status=session.status,
        text=old.text,
        language=old.language,
        duration_ms=old.duration_ms,
        segments=old.segments,
        matches=matches if version == 1 else (),
        version=version,
        versions=versions,
        task=old.segments[0].task if old.segments else Task.TRANSCRIBE,
    )
