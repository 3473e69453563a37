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
from dataclasses import replace

from voxwire.audio.decoding import SAMPLE_RATE, Audio
from voxwire.core.errors import ConfigError, VoxwireError
from voxwire.wire.records import FileJob
from voxwire.workers.engine import (
    Engine,
    EngineOptions,
    LanguageDetector,
    Segment,
    SegmentCallback,
    TranscriptionAborted,
)
from voxwire.workers.files.loop_guard import LoopGuard
from voxwire.workers.files.skipped_speech import transcribe_heard
from voxwire.workers.speakers.encoder import shared_encoder
from voxwire.workers.speakers.files import Turn, split_segment
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize
from voxwire.workers.transcript import TranscriptBuilder, words_between, words_of
from voxwire.workers.vad import SileroVad, first_speech
from voxwire_client.messages import Message, SessionStatus

log = logging.getLogger(__name__)

Emit = Callable[[Message], None]


AUTO = ("", "auto")
_DETECT_MARGIN = SAMPLE_RATE // 5  # audio kept before the first speech, for detection


def detect_language(audio: Audio, engine: Engine, options: EngineOptions) -> tuple[str, float]:
    """The language of ``audio``, told by ``engine`` from its first speech (Silero
    VAD) on: a file that opens with silence or music is judged by its words."""
    if not isinstance(engine, LanguageDetector):
        raise ConfigError(
            f"the {engine.name} engine cannot detect the language",
            hint="give the session a language such as 'en'",
        )
    start = first_speech(SileroVad(), audio) or 0
    return engine.detect_language(audio[max(0, start - _DETECT_MARGIN) :], options)


def decode_file(
    engine: Engine,
    audio: Audio,
    options: EngineOptions,
    on_segment: SegmentCallback,
    abort: Callable[[], bool] | None = None,
) -> None:
    """How a file's audio (a whole file, or one channel's turn) is decoded:
    speech the decoder skipped is decoded again
    (:mod:`voxwire.workers.files.skipped_speech`), and so is a window whose
    decode looped (:mod:`voxwire.workers.files.loop_guard`); ``on_segment``
    sees every segment kept, in order."""
    transcribe_heard(LoopGuard(engine), audio, options, on_segment, abort)


def speaker_turns(
    job: FileJob, audio: Audio, abort: Callable[[], bool] | None = None
) -> list[Turn] | None:
    """The file's speaker turns when the job asks for diarization, else None;
    ``abort`` as the engine's."""
    if job.diarize is None:
        return None
    bounds = job.diarize
    options = DiarizationOptions(min_speakers=bounds.min_speakers, max_speakers=bounds.max_speakers)
    return diarize(audio, shared_encoder(), options, abort=abort)


def job_builder(job: FileJob, options: EngineOptions) -> TranscriptBuilder:
    """The builder of ``job``'s messages (its seqs, version, redaction and prompts)."""
    return TranscriptBuilder(
        job.sid,
        language=None if options.language in AUTO else options.language,
        model=job.model,
        redact=job.redact,
        prompts=job.prompts,
        first_seq=job.first_seq,
        task=job.task,
        version=job.version,
    )


def run_file_job(
    job: FileJob,
    audio: Audio,
    engine: Engine,
    options: EngineOptions,
    emit: Emit,
    abort: Callable[[], bool] | None = None,
) -> None:
    """Transcribe ``audio`` for ``job``; every outcome, errors included, is emitted,
    except an ``abort`` (polled by the engine; the worker is stopping): then
    :class:`TranscriptionAborted` is raised and the job's ending is not emitted.
    With ``language`` "auto" the language is detected on the first speech, then
    kept for the whole file. With diarization the speaker turns are found first,
    and a segment in which the speaker changes is split there
    (:mod:`voxwire.workers.speakers.files`). The audio is decoded by
    :func:`decode_file` (skipped speech and looping windows decoded again). The job's task
    (translate: the text in English) is the engine's, whatever ``options`` said."""
    options = replace(options, task=job.task.value)
    builder = job_builder(job, options)
    emit(builder.file_progress(SessionStatus.TRANSCRIBING, 0, job.duration_ms))

    turns: list[Turn] | None = None

    def on_segment(segment: Segment) -> None:
        end_ms = max(segment.end_ms, segment.start_ms)
        text, words = builder.heard([segment]), words_of([segment])
        if turns is None:
            for message in builder.final(segment.start_ms, end_ms, text, words=words):
                emit(message)
        else:
            for piece in split_segment(segment.start_ms, end_ms, text, turns):
                inside = words_between(words, piece.start_ms, piece.end_ms)
                for message in builder.final(
                    piece.start_ms, piece.end_ms, piece.text, words=inside, speaker=piece.speaker
                ):
                    emit(message)
        emit(builder.file_progress(SessionStatus.TRANSCRIBING, end_ms, job.duration_ms))

    try:
        turns = speaker_turns(job, audio, abort)
        if options.language in AUTO:
            builder.detected(*detect_language(audio, engine, options))
            options = replace(options, language=builder.language or "en")
        decode_file(engine, audio, options, on_segment, abort)
    except TranscriptionAborted:
        raise  # the job goes back to the bus; its next run emits it all again
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
