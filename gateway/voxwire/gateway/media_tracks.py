"""A call's two media-stream tracks as one stereo stream, without I/O.

With ``<Stream track="both_tracks">`` a telephony platform sends the caller's
audio (``inbound``) and what the call plays to the caller (``outbound``: the
agent) as separate ``media`` messages, 20 ms of mu-law each, with a
``timestamp`` (ms since the stream began). :class:`TrackInterleaver` lines them
up by their timestamps and returns interleaved stereo frames (channel 1 the
first track, channel 2 the second), as a stream with separate channels takes
them (:mod:`voxwire.workers.stream.tracks`):

- a track's gap in timestamps (a lost message) is filled with silence, so the
  two stay aligned; a payload that overlaps what its track already gave is
  taken from where that ended;
- audio goes out as soon as both tracks have it; a track that falls more than
  :data:`MAX_SKEW_MS` behind the other (the platform sends nothing while one
  side is silent, or one side's messages are late) is filled with silence up
  to there, so the other's audio is not held back longer;
- :meth:`TrackInterleaver.flush` (the call ended) fills the shorter track and
  returns the rest.
"""

from __future__ import annotations

import numpy as np

MAX_SKEW_MS = 500
"""How far one track may run ahead of the other before the other is filled with silence."""

MULAW_SILENCE = 0xFF
"""A mu-law sample of silence."""


class TrackInterleaver:
    """Two tracks of 8 kHz mu-law in, interleaved stereo frames out."""

    def __init__(
        self,
        tracks: tuple[str, str],
        *,
        rate: int = 8_000,
        silence: int = MULAW_SILENCE,
        max_skew_ms: int = MAX_SKEW_MS,
    ) -> None:
        self.tracks = tracks
        self._per_ms = rate // 1000
        self._silence = silence
        self._max_skew = max_skew_ms * self._per_ms
        self._pending = {name: bytearray() for name in tracks}
        self._end = dict.fromkeys(tracks, 0)  # stream sample after each track's audio
        self._out = 0  # stream sample after the frames returned

    def add(self, track: str, payload: bytes, timestamp_ms: int | None = None) -> bytes:
        """Take ``payload`` of ``track`` (at ``timestamp_ms``, None: right after
        its last); return the interleaved frames now complete (maybe none)."""
        if track not in self._pending:
            raise ValueError(f"track {track!r} is not one of {self.tracks}")
        at = self._end[track] if timestamp_ms is None else max(0, timestamp_ms) * self._per_ms
        if at > self._end[track]:  # a gap: silence keeps the tracks aligned
            self._fill(track, at)
        overlap = self._end[track] - at
        if overlap >= len(payload):
            return self._ready()
        self._pending[track] += payload[max(0, overlap) :]
        self._end[track] += len(payload) - max(0, overlap)
        ahead = max(self._end.values())
        for name in self.tracks:
            if ahead - self._end[name] > self._max_skew:
                self._fill(name, ahead - self._max_skew)
        return self._ready()

    def flush(self) -> bytes:
        """The rest, the shorter track filled with silence."""
        ahead = max(self._end.values())
        for name in self.tracks:
            self._fill(name, ahead)
        return self._ready()

    def _fill(self, track: str, until: int) -> None:
        """Silence on ``track`` up to stream sample ``until``."""
        missing = until - self._end[track]
        if missing > 0:
            self._pending[track] += bytes([self._silence]) * missing
            self._end[track] = until

    def _ready(self) -> bytes:
        count = min(self._end.values()) - self._out
        if count <= 0:
            return b""
        first, second = (self._pending[name] for name in self.tracks)
        frames = np.empty((count, 2), dtype=np.uint8)
        frames[:, 0] = np.frombuffer(bytes(first[:count]), dtype=np.uint8)
        frames[:, 1] = np.frombuffer(bytes(second[:count]), dtype=np.uint8)
        del first[:count], second[:count]
        self._out += count
        return frames.tobytes()
