"""A live stream's audio kept in the blob store, so that it can be played back
(``GET /v1/sessions/{sid}/audio``, as WAV) and transcribed again
(:mod:`voxwire.sessions.retranscribe`).

The audio is kept as the worker decoded it, in stream order (after reordering
and, for Opus, decoding; 16 kHz mono PCM16LE). As the stream goes, every
:data:`PART_SECONDS` of it is written as a part, ``<sid>/live.<first sample>.pcm``;
once the stream has ended, the last part is written and the parts are joined
into ``<sid>/audio.pcm`` (what uploads keep too), then deleted. A worker holds
at most a part's worth (30 s: 960 KB) of each stream's audio (a redacted
stream's, one part more while its finals settle: see below). A redacted
stream's ``audio.pcm`` has its redacted spans silenced, from the times of the
redacted words of its finals, and its audio as recorded is kept only with
``keep_original_audio`` (:mod:`voxwire.sessions.audio`).

A redacted stream's parts are never written in clear (unless it keeps its
audio as recorded: then the parts are that audio, and ``unredacted.pcm`` is
joined from them). A part that filled up waits in the worker until the
stream's finals are settled past its end (the resume point's sample, plus
:data:`~voxwire.audio.silencing.REDACTION_PAD_MS` for the padding of a
redacted word just after it), then is written with the redacted words of
those finals silenced (:func:`silenced_part`), as ``audio.pcm`` will be; the
last parts, at the end, the same. So a worker holds a part and the few
seconds a final takes to settle; audio is lost only as before, when a worker
dies with audio it had not written.

A stream taken over by another worker (:mod:`voxwire.workers.stream.worker`)
goes on from its resume point: that worker's parts start there. Parts are
joined by their first sample: where two overlap, the earlier one's samples
are kept; a stretch that no part holds (audio the first worker had not
written yet when it died) is silence, so that times stay right.

:class:`AudioParts` is the pure buffer of one stream; :class:`LiveArchiver`
does the writing, off the ingestion path: a stream's writes run in order in
the background, one after the other.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine, Sequence

from voxwire.audio.codecs import ChunkDecoder
from voxwire.audio.decoding import SAMPLE_RATE, Audio, float32_to_pcm16le
from voxwire.audio.silencing import REDACTION_PAD_MS, padded
from voxwire.blobs import BlobStore
from voxwire.core.errors import AudioError, VoxwireError
from voxwire.sessions.audio import AUDIO_BLOB, Redaction, store_redacted
from voxwire.text.redacted_times import redacted_spans
from voxwire_client.messages import SegmentData

log = logging.getLogger(__name__)

PART_SECONDS = 30
"""Audio per part written while the stream goes."""
_PART = re.compile(r"live\.(\d{12})\.pcm")
_BYTES = 2  # per sample
_SAMPLES_PER_MS = SAMPLE_RATE // 1000
PAD_SAMPLES = REDACTION_PAD_MS * _SAMPLES_PER_MS
"""How far past a part's end a redacted stream's finals must be settled before it is written."""

Part = tuple[str, bytes]
"""A part's blob name (:func:`part_name`) and its PCM."""


def part_name(first_sample: int) -> str:
    return f"live.{first_sample:012d}.pcm"


class AudioParts:
    """The stream's audio not written yet, from its first sample on; :meth:`decoder`
    wraps the stream's chunk decoder so that what it decodes comes here."""

    def __init__(self, part_samples: int = PART_SECONDS * SAMPLE_RATE) -> None:
        self._part_samples = part_samples
        self._first: int | None = None
        self._pcm = bytearray()
        self.ready: list[tuple[str, bytes]] = []
        """Parts full and not taken yet (:meth:`take`)."""

    def decoder(self, inner: ChunkDecoder, first_sample: int) -> ChunkDecoder:
        """``inner``, keeping what it decodes here (its output starts at ``first_sample``)."""
        return _Keeping(inner, self, first_sample)

    def take(self, settled: int | None = None) -> list[Part]:
        """The parts that filled up since the last call; with ``settled`` (a
        redacted stream's: the stream sample its finals are settled to), only
        those that end :data:`PAD_SAMPLES` before it, in order: the others wait."""
        cut = len(self.ready)
        if settled is not None:
            ends = (_first(name) + len(pcm) // _BYTES for name, pcm in self.ready)
            cut = next((n for n, end in enumerate(ends) if end + PAD_SAMPLES > settled), cut)
        ready, self.ready = self.ready[:cut], self.ready[cut:]
        return ready

    def add(self, first_sample: int, samples: Audio) -> list[tuple[str, bytes]]:
        """Take ``samples`` (starting at stream sample ``first_sample``); the parts now full."""
        out: list[tuple[str, bytes]] = []
        if self._first is not None and first_sample != self._first + len(self._pcm) // _BYTES:
            out += self.flush()  # not where the last ended: a part of its own
        if self._first is None:
            self._first = first_sample
        self._pcm += float32_to_pcm16le(samples)
        if len(self._pcm) >= self._part_samples * _BYTES:
            out += self.flush()
        return out

    def flush(self) -> list[tuple[str, bytes]]:
        """What is held, as a part (none when nothing is)."""
        if self._first is None or not self._pcm:
            self._first = None
            return []
        part = (part_name(self._first), bytes(self._pcm))
        self._first, self._pcm = None, bytearray()
        return [part]


class _Keeping:
    """A chunk decoder that hands its output to :class:`AudioParts` too."""

    def __init__(self, inner: ChunkDecoder, parts: AudioParts, first_sample: int) -> None:
        self._inner, self._parts, self._next = inner, parts, first_sample

    def decode(self, chunk: bytes) -> Audio:
        samples = self._inner.decode(chunk)
        self._parts.ready += self._parts.add(self._next, samples)
        self._next += samples.size
        return samples

    def take_error(self) -> AudioError | None:
        return self._inner.take_error()


def silenced_part(part: Part, finals: Sequence[SegmentData]) -> Part:
    """``part`` with the redacted words of ``finals`` in it silenced, padded as
    :func:`voxwire.sessions.audio.store_redacted` pads them, to the sample."""
    name, pcm = part
    first = _first(name)
    out = bytearray(pcm)
    for start_ms, end_ms in padded(redacted_spans(finals), REDACTION_PAD_MS, 2**62):
        start = max(0, start_ms * _SAMPLES_PER_MS - first) * _BYTES
        end = min(len(out), max(0, end_ms * _SAMPLES_PER_MS - first) * _BYTES)
        if start < end:
            out[start:end] = bytes(end - start)
    return name, bytes(out)


def _first(name: str) -> int:
    """The first stream sample of the part ``name``."""
    match = _PART.fullmatch(name)
    if match is None:
        raise ValueError(f"not a part's name: {name!r}")
    return int(match[1])


def join_parts(parts: dict[str, bytes]) -> bytes:
    """The parts (name -> PCM) as one stream from sample 0: overlaps kept once (the
    earlier part's), gaps filled with silence."""
    out = bytearray()
    for name in sorted(parts):
        match = _PART.fullmatch(name)
        if match is None:
            continue
        start = int(match[1]) * _BYTES
        pcm = parts[name]
        if start > len(out):
            out += bytes(start - len(out))
        out += pcm[len(out) - start :]
    return bytes(out)


class LiveArchiver:
    """Writes live streams' audio to the blob store in the background."""

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs
        self._last: dict[str, asyncio.Task[None]] = {}  # the latest write of each stream

    def write(self, sid: str, parts: list[tuple[str, bytes]]) -> None:
        """Write ``parts`` of stream ``sid``, after its writes before."""
        if parts:
            self._chain(sid, self._put_all(sid, parts))

    def finish(
        self, sid: str, rest: list[tuple[str, bytes]], redaction: Redaction | None = None
    ) -> None:
        """The stream ended: write ``rest``, then join its parts into ``audio.pcm``;
        with ``redaction`` (a redacted session) its redacted spans silenced
        (:func:`voxwire.sessions.audio.store_redacted`), in ``rest`` too unless
        the audio as recorded is kept."""
        if redaction is not None and not redaction.keep_original:
            rest = [silenced_part(part, redaction.finals) for part in rest]
        self._chain(sid, self._join(sid, rest, redaction))

    def _chain(self, sid: str, work: Coroutine[object, object, None]) -> None:
        before = self._last.get(sid)

        async def after() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            try:
                await work
            except VoxwireError as exc:
                log.error("stream %s: its audio could not be archived: %s", sid, exc)
            finally:
                if self._last.get(sid) is task:
                    del self._last[sid]

        task = asyncio.create_task(after(), name=f"archive-{sid}")
        self._last[sid] = task

    async def _put_all(self, sid: str, parts: list[tuple[str, bytes]]) -> None:
        for name, data in parts:
            await asyncio.to_thread(self._blobs.put, self._blobs.key(sid, name), data)

    async def _join(
        self, sid: str, rest: list[tuple[str, bytes]], redaction: Redaction | None
    ) -> None:
        await self._put_all(sid, rest)

        def join() -> None:
            names = self._blobs.names(sid, "live.")
            if not names:  # no audio came (a stream refused at once)
                return
            parts = {name: self._blobs.get(self._blobs.key(sid, name)) for name in names}
            if redaction is None:
                self._blobs.put(self._blobs.key(sid, AUDIO_BLOB), join_parts(parts))
            else:
                store_redacted(self._blobs, sid, join_parts(parts), redaction)
            for name in names:
                self._blobs.delete(self._blobs.key(sid, name))

        await asyncio.to_thread(join)

    async def close(self) -> None:
        """Wait for the writes under way."""
        await asyncio.gather(*self._last.values(), return_exceptions=True)
