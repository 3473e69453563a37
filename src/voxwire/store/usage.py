"""Usage metering and quota reads, shared by both stores.

A session's usage is one row per transcript version, ``(sid, version)`` its
primary key, written in the transaction that stores the version's
``transcript`` message and only if absent: a job run twice (a worker killed
mid-job, the same record delivered again) stores its transcript twice and
counts once. A row names the tenant, the key that opened the session, the
model, the kind (``file``, ``live``, ``retranscription``), the UTC day of the
transcript and its audio length. Deleting a session keeps its usage rows: they
hold no content.

:func:`count_metered` adds the rows a commit actually inserted to the
``voxwire_usage_audio_seconds`` counter, so the counter is exact too (per
process; it restarts at zero, as every Prometheus counter does).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date

from voxwire.core.metrics import USAGE_AUDIO_SECONDS
from voxwire_client.messages import TranscriptMessage

KIND_SQL = "COALESCE(kind, CASE WHEN filename IS NULL THEN 'live' ELSE 'file' END)"
"""A session's kind (sessions stored before it was recorded: by their file name)."""

LIVE_SQL = f"{KIND_SQL} = 'live' AND version = 1 AND status IN ('queued', 'transcribing')"
"""Live streams under way (a re-transcribed live session is a file job)."""

FILE_JOBS_SQL = f"({KIND_SQL} = 'file' OR version > 1) AND status IN ('queued', 'transcribing')"
"""File jobs queued or being transcribed: uploads and re-transcriptions."""

UNKNOWN_MODEL = "unknown"


@dataclass(frozen=True, slots=True)
class Metered:
    """A usage row a transaction inserted."""

    tenant_id: str
    kind: str
    audio_ms: int


def usage_values(message: TranscriptMessage) -> tuple[int, str, str, int]:
    """``(version, model, day, audio_ms)`` of the usage row of ``message``."""
    day = message.ts.astimezone(UTC).date().isoformat()
    return message.version, message.model or UNKNOWN_MODEL, day, message.duration_ms


def count_metered(rows: list[Metered]) -> None:
    for row in rows:
        USAGE_AUDIO_SECONDS.labels(tenant=row.tenant_id, kind=row.kind).inc(row.audio_ms / 1000)


def month_of(today: date) -> date:
    return today.replace(day=1)
