"""A file job with separate channels: each channel's track is transcribed on its
own, and the finals of all tracks are published in time order, each with its
``channel`` (1, 2...) and the channel's label as its ``speaker``.

Each track keeps only its speech (:func:`voxwire.workers.channels.speech_only`,
Silero VAD), grouped into turns (:func:`~voxwire.workers.channels.turns`), each
decoded as any file is (:func:`~voxwire.workers.files.job.decode_file`:
skipped speech and looping windows decoded again); its finals are held until every
track is done, echoes of another channel are dropped
(:func:`~voxwire.workers.channels.drop_echoes`), and the rest go out in time
order through the session's one :class:`~voxwire.workers.transcript.TranscriptBuilder`,
so that seqs, prompt matches (a prompt scoped to ``customer`` hears only that
channel) and the transcript are as for any file. Progress goes up as the tracks
are decoded, one after the other; with ``language`` "auto" the language is
detected on the first turn with speech, and holds for all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.errors import VoxwireError
from voxwire.wire.records import FileJob
from voxwire.workers.channels import (
    TrackFinal,
    drop_echoes,
    in_time_order,
    speech_only,
    speech_spans,
    turns,
)
from voxwire.workers.engine import Engine, EngineOptions, Segment, TranscriptionAborted
from voxwire.workers.files.job import AUTO, Emit, decode_file, detect_language, job_builder
from voxwire.workers.transcript import TranscriptBuilder, words_of
from voxwire.workers.vad import FRAME_MS, SileroVad, speech_probabilities
from voxwire_client.messages import SessionStatus
from voxwire_client.options import default_channel_labels

log = logging.getLogger(__name__)

SAMPLES_PER_MS = SAMPLE_RATE // 1000


def run_tracks_job(
    job: FileJob,
    tracks: Sequence[Audio],
    engine: Engine,
    options: EngineOptions,
    emit: Emit,
    abort: Callable[[], bool] | None = None,
) -> None:
    """Transcribe ``tracks`` (one per channel, in channel order) for ``job``;
    everything is emitted as :func:`~voxwire.workers.files.job.run_file_job`
    does, and an ``abort`` raises :class:`TranscriptionAborted` the same way."""
    options = replace(options, task=job.task.value)
    labels = job.channel_labels or default_channel_labels(len(tracks))
    builder = job_builder(job, options)
    total_ms = job.duration_ms * len(tracks)
    emit(builder.file_progress(SessionStatus.TRANSCRIBING, 0, total_ms))
    try:
        heard = _transcribe_tracks(job, tracks, engine, options, builder, emit, abort)
    except TranscriptionAborted:
        raise
    except VoxwireError as exc:
        emit(builder.error(exc, fatal=True))
        return
    except Exception as exc:  # a bug, not bad input: the session still gets its ending
        log.exception("job %s failed inside the engine", job.sid)
        failure = VoxwireError(f"transcription failed: {type(exc).__name__}", hint="retry later")
        emit(builder.error(failure, fatal=True))
        return
    kept = drop_echoes(heard, tracks)
    if len(kept) < len(heard):
        log.info("job %s: %d echo final(s) dropped", job.sid, len(heard) - len(kept))
    for final in in_time_order(kept):
        label = labels[final.channel - 1]
        for message in builder.final(
            final.start_ms,
            final.end_ms,
            final.text,
            words=final.words,
            speaker=label,
            channel=final.channel,
        ):
            emit(message)
    emit(builder.transcript(job.duration_ms))
    emit(builder.file_progress(SessionStatus.COMPLETED, job.duration_ms, job.duration_ms))


def _transcribe_tracks(
    job: FileJob,
    tracks: Sequence[Audio],
    engine: Engine,
    options: EngineOptions,
    builder: TranscriptBuilder,
    emit: Emit,
    abort: Callable[[], bool] | None,
) -> list[TrackFinal]:
    """Every track's finals, tracks one after the other, each turn by turn
    (:func:`~voxwire.workers.channels.turns`); progress as they go."""
    heard: list[TrackFinal] = []
    total_ms = job.duration_ms * len(tracks)
    for channel, track in enumerate(tracks, start=1):
        done_ms = job.duration_ms * (channel - 1)
        probabilities = speech_probabilities(SileroVad(), track)
        speech = speech_only(track, probabilities, FRAME_MS)
        for start_ms, end_ms in turns(speech_spans(probabilities, FRAME_MS)):
            stretch = speech[start_ms * SAMPLES_PER_MS : end_ms * SAMPLES_PER_MS]
            if stretch.size == 0:
                continue
            if options.language in AUTO:
                builder.detected(*detect_language(stretch, engine, options))
                options = replace(options, language=builder.language or "en")

            def on_segment(
                segment: Segment, channel: int = channel, at: int = start_ms, done: int = done_ms
            ) -> None:
                text = builder.heard([segment])
                end = at + max(segment.end_ms, segment.start_ms)
                if text:
                    words = tuple(words_of([segment], at))
                    heard.append(TrackFinal(channel, at + segment.start_ms, end, text, words))
                emit(builder.file_progress(SessionStatus.TRANSCRIBING, done + end, total_ms))

            decode_file(engine, stretch, options, on_segment, abort)
    return heard
