"""One file job, from samples to the messages it publishes.

:func:`run_file_job` runs the engine on a job's audio and hands every message
to ``emit`` in order; the messages themselves come from the
:class:`~voxwire.workers.transcript.TranscriptBuilder` that live streams use
too. ``seq`` values are a pure function of the job and the engine's output,
so a redelivered job produces the same ``seq`` values and subscribers drop the
repeats.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from voxwire.core.audio import Audio
from voxwire.core.errors import VoxwireError
from voxwire.wire.records import FileJob
from voxwire.workers.engine import Engine, EngineOptions, Segment
from voxwire.workers.transcript import TranscriptBuilder
from voxwire_client.messages import Message, SessionStatus

log = logging.getLogger(__name__)

Emit = Callable[[Message], None]


def run_file_job(
    job: FileJob, audio: Audio, engine: Engine, options: EngineOptions, emit: Emit
) -> None:
    """Transcribe ``audio`` for ``job``; every outcome, errors included, is emitted."""
    builder = TranscriptBuilder(
        job.sid,
        language=options.language,
        redact=job.redact,
        prompts=job.prompts,
        first_seq=job.first_seq,
    )
    emit(builder.file_progress(SessionStatus.TRANSCRIBING, 0, job.duration_ms))

    def on_segment(segment: Segment) -> None:
        end_ms = max(segment.end_ms, segment.start_ms)
        for message in builder.final(segment.start_ms, end_ms, builder.heard([segment])):
            emit(message)
        emit(builder.file_progress(SessionStatus.TRANSCRIBING, end_ms, job.duration_ms))

    try:
        engine.transcribe(audio, options, on_segment=on_segment)
    except VoxwireError as exc:
        emit(builder.error(exc, fatal=True))
        return
    except Exception as exc:  # a bug, not bad input: the session still gets its ending
        log.exception("job %s failed inside the engine", job.sid)
        failure = VoxwireError(f"transcription failed: {type(exc).__name__}", hint="retry later")
        emit(builder.error(failure, fatal=True))
        return
    emit(builder.transcript(job.duration_ms))
    emit(builder.file_progress(SessionStatus.COMPLETED, job.duration_ms, job.duration_ms))
