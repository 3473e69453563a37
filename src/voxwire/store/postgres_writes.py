"""Writing batches of messages to the PostgreSQL store.

A batch is stored in one transaction, in pipeline mode (two round trips): one
``INSERT ... ON CONFLICT DO NOTHING`` for the log, then the new messages'
effects folded into one statement per table by :class:`BatchFold`. Concurrent
writers recording the same ``(sid, seq)`` apply its effect exactly once (the
second insert waits for the first and skips). Rows are written in ``(sid, seq)``
order, one lock order for every writer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from pydantic import TypeAdapter

from voxwire.store.postgres_usage import INSERT_USAGE
from voxwire.store.usage import Metered, usage_values
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
    encode_message,
)

Conn = AsyncConnection[DictRow]

_SEGMENT_TUPLE = TypeAdapter(tuple[SegmentData, ...])

_INSERT_NEW_MESSAGES = (
    "INSERT INTO messages (sid, seq, type, payload) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[]::jsonb[])"
)
_INSERT_MESSAGES = _INSERT_NEW_MESSAGES + " ON CONFLICT (sid, seq) DO NOTHING RETURNING sid, seq"
_UPDATE_SESSIONS = (
    "UPDATE sessions s SET "
    "last_seq = GREATEST(s.last_seq, v.last_seq), "
    "status = COALESCE(v.status, s.status), "
    "percent = COALESCE(v.percent, s.percent), "
    "duration_ms = GREATEST(COALESCE(v.duration_ms, s.duration_ms), v.min_duration_ms), "
    "language = CASE WHEN v.has_language THEN v.language ELSE s.language END, "
    "error_code = COALESCE(v.error_code, s.error_code), "
    "error_message = CASE WHEN v.error_code IS NULL THEN s.error_message "
    "ELSE v.error_message END "
    "FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::float8[], %b::bigint[], "
    "%b::bigint[], %b::bool[], %b::text[], %b::text[], %b::text[]) "
    "AS v(sid, last_seq, status, percent, duration_ms, min_duration_ms, has_language, "
    "language, error_code, error_message) "
    "WHERE s.sid = v.sid"
)
_UPSERT_SEGMENTS = (
    "INSERT INTO segments (sid, idx, payload) "
    "SELECT * FROM unnest(%b::text[], %b::int[], %b::text[]::jsonb[]) "
    "ON CONFLICT (sid, idx) DO UPDATE SET payload = excluded.payload"
)
_DELETE_SEGMENTS = "DELETE FROM segments WHERE sid = ANY(%b::text[])"
_UPSERT_MATCHES = (
    "INSERT INTO matches (sid, seq, payload) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[]::jsonb[]) "
    "ON CONFLICT (sid, seq) DO UPDATE SET payload = excluded.payload"
)
_UPSERT_TRANSCRIPTS = (
    "INSERT INTO transcripts (sid, segments, text) "
    "SELECT * FROM unnest(%b::text[], %b::text[]::jsonb[], %b::text[]) "
    "ON CONFLICT (sid) DO UPDATE SET segments = excluded.segments, text = excluded.text"
)


def _message_rows(batch: list[Message]) -> tuple[list[Any], ...]:
    rows = sorted(batch, key=lambda m: (m.sid, m.seq))  # one lock order for every writer
    return (
        [m.sid for m in rows],
        [m.seq for m in rows],
        [m.type for m in rows],
        [encode_message(m).decode() for m in rows],
    )


async def record_new(conn: Conn, batch: list[Message], metered: list[Metered]) -> int:
    """Insert and apply ``batch``, all of it new (inside a transaction, pipelined:
    nothing waits for an answer; a message stored before fails the transaction).
    The usage rows inserted are added to ``metered``."""
    await conn.execute(_INSERT_NEW_MESSAGES, _message_rows(batch))
    metered += await _apply(conn, batch)
    return len(batch)


async def record(conn: Conn, batch: list[Message], metered: list[Metered]) -> int:
    """Insert the log rows of ``batch`` and apply the new ones (inside a transaction)."""
    cur = await conn.execute(_INSERT_MESSAGES, _message_rows(batch))
    inserted = {(r["sid"], r["seq"]) for r in await cur.fetchall()}
    if not inserted:
        return 0
    metered += await _apply(conn, [m for m in batch if (m.sid, m.seq) in inserted])
    return len(inserted)


async def _apply(conn: Conn, messages: list[Message]) -> list[Metered]:
    """The effects of ``messages``, folded into one statement per table (pipelined:
    sent with the COMMIT, in one round trip; a batch with transcripts waits for
    the usage rows it inserted, one round trip more)."""
    fold = BatchFold()
    for message in messages:
        fold.add(message)
    for statement, args in fold.statements():
        await conn.execute(statement, args)
    if not fold.usage:
        return []
    keys = sorted(fold.usage)
    cur = await conn.execute(
        INSERT_USAGE,
        (
            [k[0] for k in keys],
            [k[1] for k in keys],
            *([fold.usage[k][i] for k in keys] for i in range(3)),
        ),
    )
    return [Metered(r["tenant_id"], r["kind"], r["audio_ms"]) for r in await cur.fetchall()]


@dataclass(slots=True)
class _SessionChange:
    """What a batch does to one ``sessions`` row (None: leaves the column as it is)."""

    last_seq: int = 0
    status: str | None = None
    percent: float | None = None
    duration_ms: int | None = None  # set by a transcript
    min_duration_ms: int | None = None  # raised by progress
    has_language: bool = False
    language: str | None = None
    error_code: str | None = None
    error_message: str | None = None


_CHANGE_FIELDS = tuple(f.name for f in fields(_SessionChange))


class BatchFold:
    """A batch of new messages folded, in order, into one statement per table.

    The same effects as :func:`voxwire.store.sqlite._apply` applied message by
    message, in a handful of round trips instead of one per message.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, _SessionChange] = {}
        self.segments: dict[tuple[str, int], str] = {}
        self.matches: dict[tuple[str, int], str] = {}
        self.transcripts: dict[str, tuple[str, str]] = {}
        self.replaced: set[str] = set()  # sessions whose segments a new version replaces
        self.usage: dict[tuple[str, int], tuple[str, str, int]] = {}  # (model, day, audio_ms)

    def add(self, message: Message) -> None:
        sid = message.sid
        change = self.sessions.setdefault(sid, _SessionChange())
        change.last_seq = max(change.last_seq, message.seq)
        if isinstance(message, ProgressMessage):
            change.status = message.status.value
            change.percent = message.percent
            if change.duration_ms is not None:
                change.duration_ms = max(change.duration_ms, message.duration_ms)
            else:
                change.min_duration_ms = max(change.min_duration_ms or 0, message.duration_ms)
        elif isinstance(message, SegmentMessage) and message.type == "final":
            if message.version > 1:  # a re-transcription's: current once its transcript is
                return
            segment = message.segment
            self.segments[(sid, segment.index)] = segment.model_dump_json()
        elif isinstance(message, MatchMessage):
            data = message.data()
            self.matches[(sid, message.seq)] = data.model_dump_json()
        elif isinstance(message, TranscriptMessage):
            segments = _SEGMENT_TUPLE.dump_json(message.segments).decode()
            self.transcripts[sid] = (segments, message.text)
            version, model, day, audio_ms = usage_values(message)
            self.usage.setdefault((sid, version), (model, day, audio_ms))
            if message.version > 1:  # a re-transcription: its segments become the current ones
                self.replaced.add(sid)
                for key in [k for k in self.segments if k[0] == sid]:
                    del self.segments[key]
                for one in message.segments:
                    self.segments[(sid, one.index)] = one.model_dump_json()
            change.has_language, change.language = True, message.language
            change.duration_ms, change.min_duration_ms = message.duration_ms, None
        elif isinstance(message, ErrorMessage) and message.fatal:
            change.status = SessionStatus.FAILED.value
            change.error_code, change.error_message = message.code, message.message

    def statements(self) -> list[tuple[str, tuple[list[Any], ...]]]:
        changes = sorted(self.sessions.items())
        out: list[tuple[str, tuple[list[Any], ...]]] = [
            (
                _UPDATE_SESSIONS,
                (
                    [sid for sid, _ in changes],
                    *([getattr(c, name) for _, c in changes] for name in _CHANGE_FIELDS),
                ),
            )
        ]
        if self.replaced:
            out.append((_DELETE_SEGMENTS, (sorted(self.replaced),)))
        for statement, table in (
            (_UPSERT_SEGMENTS, self.segments),
            (_UPSERT_MATCHES, self.matches),
        ):
            if table:
                keys = sorted(table)
                out.append(
                    (
                        statement,
                        ([k[0] for k in keys], [k[1] for k in keys], [table[k] for k in keys]),
                    )
                )
        if self.transcripts:
            sids = sorted(self.transcripts)
            out.append(
                (
                    _UPSERT_TRANSCRIPTS,
                    (
                        sids,
                        [self.transcripts[sid][0] for sid in sids],
                        [self.transcripts[sid][1] for sid in sids],
                    ),
                )
            )
        return out
