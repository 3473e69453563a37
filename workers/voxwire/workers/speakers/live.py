"""A live stream's speaker labels: the tracker (:mod:`.tracker`) fed with each
final's audio, embedded by the shared encoder. Off (every label None) unless the
stream asked for diarization."""

from __future__ import annotations

from voxwire.core.samples import Audio
from voxwire.workers.speakers.encoder import shared_encoder
from voxwire.workers.speakers.tracker import SpeakerState, SpeakerTracker, TrackerConfig

__all__ = ["SpeakerState", "StreamSpeakers"]

_MS_PER_SAMPLE = 1 / 16


class StreamSpeakers:
    """The speakers of one stream; one final at a time, in order."""

    def __init__(self, on: bool, max_speakers: int | None, state: SpeakerState = ()) -> None:
        config = TrackerConfig(max_speakers=max_speakers)
        self._tracker = SpeakerTracker.restore(config, state) if on else None

    def label(self, audio: Audio) -> str | None:
        """The speaker of the final whose samples are ``audio`` (None: diarization off)."""
        if self._tracker is None or len(audio) == 0:
            return None
        embedding = shared_encoder().embed_utterance(audio)
        return self._tracker.assign(embedding, round(len(audio) * _MS_PER_SAMPLE))

    def state(self) -> SpeakerState:
        return () if self._tracker is None else self._tracker.state()
