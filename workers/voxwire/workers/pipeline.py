"""One file job, from samples to the messages it publishes. No I/O here.

:func:`run_file_job` drives an engine and hands every message to ``emit`` in
order. ``seq`` values are a pure function of the job and the engine's output,
so a redelivered job produces the same ``seq`` values and subscribers drop the
repeats.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from voxwire.core.audio import Audio
from voxwire.core.errors import VoxwireError
from voxwire.core.redaction import redactor
from voxwire.core.standing_prompts import StandingPrompts, prompt_of
from voxwire.wire.records import FileJob
from voxwire.workers.engine import Engine, EngineOptions, Segment
from voxwire_client.api import RedactMode
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    TranscriptMessage,
)

log = logging.getLogger(__name__)

Emit = Callable[[Message], None]


@dataclass
class _Session:
    """Seq counter and accumulated output of one job."""

    job: FileJob
    emit: Emit
    seq: int = 0
    segments: list[SegmentData] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seq = self.job.first_seq

    def next_seq(self) -> int:
        seq, self.seq = self.seq, self.seq + 1
        return seq

    def progress(self, status: SessionStatus, processed_ms: int) -> None:
        duration = self.job.duration_ms
        percent = (
            100.0
            if status is SessionStatus.COMPLETED
            else (min(99.0, 100.0 * processed_ms / duration) if duration else 0.0)
        )
        self.emit(
            ProgressMessage(
                sid=self.job.sid,
                seq=self.next_seq(),
                status=status,
                percent=round(percent, 1),
                processed_ms=min(processed_ms, duration),
                duration_ms=duration,
            )
        )


def run_file_job(
    job: FileJob, audio: Audio, engine: Engine, options: EngineOptions, emit: Emit
) -> None:
    """Transcribe ``audio`` for ``job``; every outcome, errors included, is emitted."""
    session = _Session(job=job, emit=emit)
    prompts = StandingPrompts([prompt_of(p) for p in job.prompts])
    session.progress(SessionStatus.TRANSCRIBING, 0)

    def on_segment(segment: Segment) -> None:
        text = segment.text.strip()
        if job.redact is not RedactMode.OFF:
            text = redactor().redact(text, job.redact)
        data = SegmentData(
            id=f"{job.sid}-{len(session.segments)}",
            index=len(session.segments),
            start_ms=segment.start_ms,
            end_ms=max(segment.end_ms, segment.start_ms),
            text=text,
            language=options.language,
        )
        session.segments.append(data)
        emit(SegmentMessage(sid=job.sid, seq=session.next_seq(), type="final", segment=data))
        for hit in prompts.on_final(data.id, data.text, data.start_ms, data.end_ms):
            emit(
                MatchMessage(
                    sid=job.sid,
                    seq=session.next_seq(),
                    prompt_id=hit.prompt_id,
                    prompt=hit.prompt,
                    score=hit.score,
                    start_ms=hit.start_ms,
                    end_ms=hit.end_ms,
                    text=hit.text,
                    highlight=hit.highlight,
                    segment_ids=tuple(hit.segment_ids),
                )
            )
        session.progress(SessionStatus.TRANSCRIBING, data.end_ms)

    try:
        engine.transcribe(audio, options, on_segment=on_segment)
    except VoxwireError as exc:
        emit(error_message(job.sid, session.next_seq(), exc))
        return
    except Exception as exc:  # a bug, not bad input: the session still gets its ending
        log.exception("job %s failed inside the engine", job.sid)
        failure = VoxwireError(f"transcription failed: {type(exc).__name__}", hint="retry later")
        emit(error_message(job.sid, session.next_seq(), failure))
        return
    emit(
        TranscriptMessage(
            sid=job.sid,
            seq=session.next_seq(),
            text=" ".join(s.text for s in session.segments if s.text).strip(),
            language=options.language,
            duration_ms=job.duration_ms,
            segments=tuple(session.segments),
        )
    )
    session.progress(SessionStatus.COMPLETED, job.duration_ms)


def error_message(sid: str, seq: int, exc: VoxwireError) -> ErrorMessage:
    return ErrorMessage(sid=sid, seq=seq, code=exc.code, message=exc.message, hint=exc.hint)
