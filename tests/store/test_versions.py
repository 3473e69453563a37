"""Transcript versions in both stores: a finished session reopens once for its next
version; that version's finals wait in the log until its transcript, which then
replaces the session's segments and text; every version's transcript is kept; the
redaction the session was opened with comes back with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.store import fresh_schema, postgres_store
from voxwire.store import SessionRecord, SqliteStore, Store
from voxwire_client.api import RedactMode
from voxwire_client.messages import (
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def _store(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    if kind == "postgres":
        async with postgres_store(fresh_schema()) as store:
            yield store
        return
    sqlite = SqliteStore(tmp_path / "store.sqlite3")
    try:
        yield sqlite
    finally:
        await sqlite.close()


def _segments(sid: str, version: int, texts: list[str]) -> tuple[SegmentData, ...]:
    again = f"v{version}-" if version > 1 else ""
    return tuple(
        SegmentData(
            id=f"{sid}-{again}{i}", index=i, start_ms=i * 1000, end_ms=i * 1000 + 900, text=t
        )
        for i, t in enumerate(texts)
    )


def _run(sid: str, seq: int, version: int, texts: list[str]) -> list[Message]:
    """One version's messages from ``seq``: a final per text, transcript, completed."""
    segments = _segments(sid, version, texts)
    finals = [
        SegmentMessage(sid=sid, seq=seq + i, version=version, type="final", segment=s)
        for i, s in enumerate(segments)
    ]
    end = seq + len(finals)
    text = " ".join(texts)
    return [
        *finals,
        TranscriptMessage(
            sid=sid, seq=end, version=version, text=text, duration_ms=3000, segments=segments
        ),
        ProgressMessage(
            sid=sid, seq=end + 1, version=version, status=SessionStatus.COMPLETED, percent=100
        ),
    ]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_new_version_replaces_the_current_one_and_the_old_stays(
    kind: str, tmp_path: Path
) -> None:
    async with _store(kind, tmp_path) as store:
        tenant = await store.create_tenant("acme")
        sid = "s_versions"
        record = SessionRecord(
            sid=sid, tenant_id=tenant.id, status=SessionStatus.QUEUED, created_at=datetime.now(UTC)
        )
        await store.create_session(record, RedactMode.MASK)
        assert await store.reopen_session(sid) is None  # not finished yet
        await store.record_messages(_run(sid, 2, 1, ["comfy eye", "folder", "again"]))

        reopened = await store.reopen_session(sid)
        assert reopened is not None and reopened.redact is RedactMode.MASK
        assert (reopened.session.version, reopened.session.status) == (2, SessionStatus.QUEUED)
        assert reopened.session.last_seq == 6
        assert await store.reopen_session(sid) is None  # one at a time

        second = _run(sid, 7, 2, ["ComfyUI folder"])
        await store.record_messages(second[:1])  # its final: not current until its transcript
        assert [s.text for s in await store.segments(sid)] == ["comfy eye", "folder", "again"]
        await store.record_messages(second[1:])
        assert [s.id for s in await store.segments(sid)] == [f"{sid}-v2-0"]
        session = await store.get_session(sid)
        assert session is not None
        assert (session.text, session.version, session.status) == (
            "ComfyUI folder",
            2,
            SessionStatus.COMPLETED,
        )
        versions = await store.transcript_versions(sid)
        assert [(t.version, t.text) for t in versions] == [
            (1, "comfy eye folder again"),
            (2, "ComfyUI folder"),
        ]
