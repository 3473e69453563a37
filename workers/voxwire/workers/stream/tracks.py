"""A live stream with separate channels: its interleaved chunks split into one
track per channel, and its echoes told apart. Pure: no engine, no bus, no clock.

A stream with ``channels: "separate"`` sends each chunk as interleaved frames
of its channels (PCM16 or G.711, :func:`voxwire.workers.channels.deinterleave`).
Its session has one intake per channel (VAD, endpointing, work items of its
own), each given every chunk. :class:`TrackDecoders` gives each intake a
:class:`~voxwire.audio.codecs.ChunkDecoder` of its channel: the first channel's
decoder splits the chunk and decodes every channel (each with a decoder and
resampler of its own), and hands the others theirs, in order, as their intakes
take the same chunk right after (the intakes accept the same chunks in the same
order: they get the same numbers and the same ends). A chunk that does not hold
whole frames is refused on every channel alike (its audio dropped, as a PCM16
chunk with an odd byte count is). The archive, when kept, gets the channels'
mix, as an upload's ``audio.pcm`` is.

Echo. :func:`is_live_echo` applies the upload path's rule
(:mod:`voxwire.workers.channels`) to a live final as it is decided: it is an
echo of a final of another channel decided before it that overlaps it in time,
holds at least half of its words, and is at least ``ECHO_DB`` louder over its
span (levels from the intakes' frames). An echo decided before the final it
echoes (rare: the echo ends later, so its pause ends later) is not caught.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from voxwire.audio.codecs import ChunkDecoder, chunk_decoder
from voxwire.audio.decoding import Audio
from voxwire.audio.libopus import OpusLibrary
from voxwire.core.errors import AudioError
from voxwire.workers.channels import ECHO_DB, TrackFinal, deinterleave, sounds_like
from voxwire.workers.stream.config import StreamConfig
from voxwire.workers.stream.intake import StreamIntake
from voxwire.workers.transcript import Words
from voxwire_client.encodings import SAMPLE_BYTES, AudioEncoding
from voxwire_client.messages import SegmentData, TranscriptMessage

KeepAudio = Callable[[ChunkDecoder, int], ChunkDecoder]
"""Wraps a chunk decoder (given its output's first sample): the archive's."""


@dataclass(eq=False)
class Track:
    """One channel of a live session: its intake and where its finals stand."""

    intake: StreamIntake
    settled: tuple[int, int, int]
    """(chunk, skip, stream sample) where its audio not covered by a final starts."""
    label: str | None = None
    """Its speaker label (None: a mono stream, whose finals have no channel)."""
    resumed: int = 0
    """The stream sample it was settled to when the session resumed here: finals
    before it were decided by the worker before."""
    likely: tuple[int, int, str, Words] | None = None
    """The last likely final's (start, end, text, words)."""
    shown: tuple[int, int] = (-1, -1)
    """(start_ms, end_ms) of its last partial sent."""


def stream_decoders(
    config: StreamConfig,
    *,
    first_sample: int,
    from_start: bool,
    keep_audio: KeepAudio | None,
    opus: OpusLibrary | None,
) -> list[ChunkDecoder]:
    """A chunk decoder per channel of the stream (one for a mono stream);
    ``keep_audio`` wraps the mono one, or gets the channels' mix."""
    if config.channels > 1:
        tracks = TrackDecoders(
            config.channels,
            config.encoding,
            config.sample_rate,
            keep_audio=keep_audio,
            first_sample=first_sample,
        )
        return [tracks.decoder(n) for n in range(config.channels)]
    decoder = chunk_decoder(
        config.encoding,
        config.frame_ms,
        sample_rate=config.sample_rate,
        from_start=from_start,
        opus=opus,
    )
    return [decoder if keep_audio is None else keep_audio(decoder, first_sample)]


def in_time_order(transcript: TranscriptMessage) -> TranscriptMessage:
    """A transcript whose finals came from several channels, in time order (by
    start, then channel)."""
    segments = sorted(transcript.segments, key=lambda s: (s.start_ms, s.channel or 0))
    text = " ".join(s.text for s in segments if s.text).strip()
    return transcript.model_copy(update={"segments": tuple(segments), "text": text})


class _Given:
    """A chunk decoder that returns what it was handed (the mix, for the archive)."""

    def __init__(self) -> None:
        self.next: Audio = np.empty(0, dtype=np.float32)

    def decode(self, chunk: bytes) -> Audio:
        return self.next

    def take_error(self) -> AudioError | None:
        return None


class TrackDecoders:
    """The chunk decoders of a stream's channels (see the module docstring)."""

    def __init__(
        self,
        channels: int,
        encoding: AudioEncoding,
        sample_rate: int,
        *,
        keep_audio: KeepAudio | None = None,
        first_sample: int = 0,
    ) -> None:
        if encoding not in SAMPLE_BYTES:
            raise ValueError(f"{encoding.value} cannot carry separate channels")
        self.channels = channels
        self._width = SAMPLE_BYTES[encoding]
        self._inner = [chunk_decoder(encoding, sample_rate=sample_rate) for _ in range(channels)]
        self._ready: list[deque[Audio | AudioError]] = [deque() for _ in range(channels)]
        self._given = _Given()
        self._keeper = None if keep_audio is None else keep_audio(self._given, first_sample)

    def decoder(self, track: int) -> ChunkDecoder:
        """The decoder of channel ``track`` (0, 1...)."""
        return _TrackDecoder(self, track)

    def split(self, chunk: bytes) -> Audio:
        """Decode every channel of ``chunk``: the first channel's samples; the
        others' wait for their decoders. Raises AudioError for a chunk that does
        not hold whole frames (each channel's decoder raises it too)."""
        try:
            parts = deinterleave(chunk, self.channels, self._width)
        except ValueError as exc:
            error = AudioError(
                str(exc), hint=f"send whole frames of {self.channels} interleaved samples"
            )
            for ready in self._ready[1:]:
                ready.append(error)
            raise error from exc
        decoded = [inner.decode(part) for inner, part in zip(self._inner, parts, strict=True)]
        for ready, samples in zip(self._ready[1:], decoded[1:], strict=True):
            ready.append(samples)
        if self._keeper is not None:
            size = min(samples.size for samples in decoded)
            self._given.next = np.mean([s[:size] for s in decoded], axis=0, dtype=np.float32)
            self._keeper.decode(b"")
        return decoded[0]

    def take(self, track: int) -> Audio:
        """Channel ``track``'s samples of the next chunk the first channel decoded."""
        ready = self._ready[track].popleft()
        if isinstance(ready, AudioError):
            raise AudioError(ready.message, hint=ready.hint)
        return ready

    def take_error(self, track: int) -> AudioError | None:
        return self._inner[track].take_error()


class _TrackDecoder:
    def __init__(self, tracks: TrackDecoders, track: int) -> None:
        self._tracks, self._track = tracks, track

    def decode(self, chunk: bytes) -> Audio:
        if self._track == 0:
            return self._tracks.split(chunk)
        return self._tracks.take(self._track)

    def take_error(self) -> AudioError | None:
        return self._tracks.take_error(self._track)


def is_live_echo(
    final: TrackFinal,
    earlier: Iterable[SegmentData],
    level_db: Callable[[int, int, int], float],
) -> bool:
    """Whether ``final`` (channels 1, 2...) is an echo of one of the ``earlier``
    finals of the session; ``level_db(channel, start_ms, end_ms)``: a channel's level."""
    for other in earlier:
        if other.channel is None or other.channel == final.channel:
            continue
        theirs = TrackFinal(other.channel, other.start_ms, other.end_ms, other.text)
        if not sounds_like(final, theirs):
            continue
        mine = level_db(final.channel, final.start_ms, final.end_ms)
        louder = level_db(other.channel, final.start_ms, final.end_ms)
        if louder - mine >= ECHO_DB:
            return True
    return False
