"""A live stream's speaker labels: the tracker (:mod:`.tracker`) fed with each
final's audio, embedded by the shared encoder. Off (every label None) unless the
stream asked for diarization.

A final of :data:`SPLIT_MIN_MS` or more may hold several voices (talkers who do
not pause long enough for the endpointer): its 1.6 s windows are clustered as a
file's are (:func:`.clustering.cluster`, one voice unless they differ), each
voice found goes to the tracker in order of appearance, and the final is split
where the voice changes (:func:`.files.split_segment`); two voices of one final
never get one label (unless ``max_speakers`` forces it). Otherwise the final's
whole audio is one embedding and one label.
"""

from __future__ import annotations

import numpy as np

from voxwire.core.samples import Audio
from voxwire.workers.speakers.clustering import cluster
from voxwire.workers.speakers.encoder import PARTIAL_FRAMES, partial_starts, shared_encoder, unit
from voxwire.workers.speakers.features import mel_spectrogram, normalize_volume
from voxwire.workers.speakers.files import Piece, Turn, split_segment, turns_of
from voxwire.workers.speakers.tracker import SpeakerState, SpeakerTracker, TrackerConfig

__all__ = ["SPLIT_MIN_MS", "SpeakerState", "StreamSpeakers"]

SPLIT_MIN_MS = 4000
"""A final at least this long is looked at for a change of voice inside it."""
_MS_PER_SAMPLE = 1 / 16


class StreamSpeakers:
    """The speakers of one stream; one final at a time, in order."""

    def __init__(self, on: bool, max_speakers: int | None, state: SpeakerState = ()) -> None:
        config = TrackerConfig(max_speakers=max_speakers)
        self._tracker = SpeakerTracker.restore(config, state) if on else None

    @property
    def on(self) -> bool:
        """Whether the stream asked for diarization."""
        return self._tracker is not None

    def pieces(self, start_ms: int, end_ms: int, text: str, audio: Audio) -> list[Piece]:
        """The final ``[start_ms, end_ms)`` of ``text``, whose samples are ``audio``,
        as pieces of one speaker each (speaker None: diarization off)."""
        whole = [Piece(start_ms, end_ms, text, None)]
        if self._tracker is None or len(audio) == 0:
            return whole
        encoder = shared_encoder()
        mel = mel_spectrogram(normalize_volume(audio))
        starts = partial_starts(len(mel))
        windows = encoder.embed_windows(mel, starts)
        duration = round(len(audio) * _MS_PER_SAMPLE)
        if duration < SPLIT_MIN_MS or len(windows) < 3:
            label = self._tracker.assign(unit(windows.mean(axis=0)), duration)
            return [Piece(start_ms, end_ms, text, label)]
        local = cluster(windows)
        labels: list[str] = []
        for voice in range(int(local.max()) + 1):
            mine = local == voice
            spoken = int(mine.sum()) * (duration // len(local))
            centroid = unit(windows[mine].mean(axis=0))
            labels.append(self._tracker.assign(centroid, spoken, exclude=labels))
        centres = np.array(starts) + PARTIAL_FRAMES // 2
        nearest = np.abs(np.arange(len(mel))[:, None] - centres[None, :]).argmin(axis=1)
        numbers = {label: int(label[1:]) - 1 for label in labels}
        frames = np.array([numbers[labels[k]] for k in local[nearest]], dtype=np.int64)
        turns = [
            Turn(start_ms + t.start_ms, start_ms + t.end_ms, t.speaker) for t in turns_of(frames)
        ]
        return split_segment(start_ms, end_ms, text, turns)

    def state(self) -> SpeakerState:
        return () if self._tracker is None else self._tracker.state()
