"""A live stream's speaker labels: the tracker (:mod:`.tracker`) fed with each
final's audio, embedded by the shared encoder. Off (every label None) unless the
stream asked for diarization.

A final of :data:`SPLIT_MIN_MS` or more may hold several voices (talkers who do
not pause long enough for the endpointer, or talk at once): it goes through the
segmentation network and the clustering of a file
(:func:`.segmented.speaker_frames`), each voice found goes to the tracker,
the one heard most first, and the final is split where the voice changes
(:func:`.files.split_segment`; where two talk at once, the one who was talking
first keeps the words); two voices of one final never get one label (unless
``max_speakers`` forces it). Otherwise the final's whole audio is one embedding
and one label.
"""

from __future__ import annotations

import numpy as np

from voxwire.audio.samples import Audio
from voxwire.workers.speakers.encoder import FrameReader, shared_encoder
from voxwire.workers.speakers.files import Piece, split_segment
from voxwire.workers.speakers.segmentation import FRAME_STEP
from voxwire.workers.speakers.segmented import (
    DiarizationOptions,
    frame_turns,
    shared_segmenter,
    speaker_frames,
    voice_embeddings,
)
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
        duration = round(len(audio) * _MS_PER_SAMPLE)
        reader = FrameReader(encoder, audio)
        features = reader.covering(0, len(audio))  # all of it, kept for the label below
        if duration >= SPLIT_MIN_MS:
            options = DiarizationOptions()
            active = speaker_frames(audio, reader, encoder, shared_segmenter(), options)
            voices = voice_embeddings(active, features, encoder)
            if sum(v is not None for v in voices) > 1:
                labels = [""] * len(voices)
                spoken = active.sum(axis=0) * FRAME_STEP * _MS_PER_SAMPLE
                for k in np.argsort(-spoken, kind="stable"):
                    vector = voices[k]
                    if vector is not None:
                        taken = [label for label in labels if label]
                        labels[k] = self._tracker.assign(vector, int(spoken[k]), exclude=taken)
                heard = [k for k, label in enumerate(labels) if label]
                turns = frame_turns(active[:, heard], [labels[k] for k in heard], start_ms)
                return split_segment(start_ms, end_ms, text, turns)
        if not len(features.values):  # under 30 ms: nothing to tell the voice by
            return whole
        label = self._tracker.assign(encoder.pool(features.values), duration)
        return [Piece(start_ms, end_ms, text, label)]

    def state(self) -> SpeakerState:
        return () if self._tracker is None else self._tracker.state()
