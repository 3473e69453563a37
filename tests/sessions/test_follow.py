"""Following a session through the store (what the OpenAI and Deepgram routes
answer from): each step holds what was stored since the step before, and the
terminal step holds every last message, however many came at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from voxwire.sessions.follow import PAGE, finished, follow
from voxwire.store import SessionRecord
from voxwire.store.sqlite import SqliteStore
from voxwire_client.messages import ProgressMessage, SegmentData, SegmentMessage, SessionStatus


def _final(sid: str, seq: int) -> SegmentMessage:
    segment = SegmentData(id=f"{sid}-{seq}", index=seq, start_ms=seq, end_ms=seq + 1, text=str(seq))
    return SegmentMessage(sid=sid, seq=seq, type="final", segment=segment)


def _completed(sid: str, seq: int) -> ProgressMessage:
    return ProgressMessage(sid=sid, seq=seq, status=SessionStatus.COMPLETED, percent=100)


async def _store(tmp_path: Path) -> tuple[SqliteStore, str]:
    store = SqliteStore(tmp_path / "store.sqlite3")
    tenant = await store.create_tenant("acme")
    now = datetime.now(UTC)
    await store.create_session(SessionRecord("s1", tenant.id, SessionStatus.QUEUED, now))
    return store, "s1"


async def test_each_step_holds_what_came_since_and_the_last_holds_every_message(
    tmp_path: Path,
) -> None:
    store, sid = await _store(tmp_path)
    await store.record_messages([_final(sid, 2), _final(sid, 3)])
    steps = follow(store, sid, poll_s=0.01)
    first = await anext(steps)
    assert [m.seq for m in first.messages] == [2, 3] and not first.terminal
    burst = [_final(sid, seq) for seq in range(4, 4 + PAGE + 500)]  # more than one page
    last_seq = burst[-1].seq + 1
    await store.record_messages([*burst, _completed(sid, last_seq)])
    seqs: list[int] = []
    async for step in steps:
        seqs += [m.seq for m in step.messages]
        if step.terminal:
            break
    assert seqs == list(range(4, last_seq + 1))
    await store.close()


async def test_finished_waits_for_the_end_or_gives_up(tmp_path: Path) -> None:
    store, sid = await _store(tmp_path)
    assert await finished(store, sid, max_wait_s=0.05, poll_s=0.01) is None
    waiting = asyncio.create_task(finished(store, sid, max_wait_s=30, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await store.record_message(_completed(sid, 2))
    session = await waiting
    assert session is not None and session.status is SessionStatus.COMPLETED
    await store.close()
