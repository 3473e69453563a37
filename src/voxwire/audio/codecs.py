"""Live audio chunks in, 16 kHz float32 samples out: one decoder per stream.

A stream declares its encoding and sample rate when it starts
(:class:`~voxwire_client.api.StreamRequest` ``encoding``, ``sample_rate`` and
``frame_ms``; the combinations: :mod:`voxwire_client.encodings`):

``pcm16``
    Each chunk is PCM16LE mono at 8, 16 or 48 kHz. A chunk with an odd byte
    count raises :class:`~voxwire.core.errors.AudioError`.
``mulaw``, ``alaw``
    Each chunk is G.711 bytes, one per sample, at 8 or 16 kHz
    (:mod:`voxwire.audio.g711`); any byte count is whole samples.

Samples at another rate than 16 kHz go through one band-limited
:class:`~voxwire.audio.resample.StreamResampler` per stream, whose filter state
runs on from chunk to chunk (what it costs in WER against 16 kHz PCM:
docs/streams.md, "Telephone audio"). It holds back 2 ms of audio until the
next chunk, so a stream's last 2 ms are not heard; a decoder taking a stream
over at a later chunk starts its filter afresh, 2 ms of stream time apart.
``opus``
    Each chunk is one Opus packet (RFC 6716) of ``frame_ms`` milliseconds, any
    sample rate the encoder chose, mono. The decoder keeps its state from packet
    to packet, as Opus requires. A packet that does not decode (empty, damaged,
    not Opus) is a *bad frame*: it is replaced by ``frame_ms`` of silence, so the
    times of everything after it stay the device's, and counted
    (``voxwire_stream_bad_frames_total``). The decoder reports it through
    :meth:`ChunkDecoder.take_error`, never by raising, so the silence is still
    used.

    The first :data:`OPUS_LOOKAHEAD_SAMPLES` decoded samples of a stream are
    dropped: the encoder's look-ahead (RFC 7845's pre-skip; 6.5 ms, what
    libopus reports for its voip and audio modes), which a stream of bare
    packets does not carry. Without it every sound comes 6.5 ms late against
    the VAD's 32 ms frames: the VAD decided differently from the same audio
    sent as PCM on 2.7% of the frames of the eval recordings at 16 kbit/s
    instead of 1.5%, moving segment boundaries, and the live WER was 2.5
    points behind PCM instead of 1.7.

Two decoders, the same samples in time: libopus's own with LACE, its speech
enhancement (:mod:`voxwire.audio.libopus`), when the worker has that library
(``voxwire models install opus-lace``), else FFmpeg's through PyAV (the library
that decodes uploads). :func:`opus_packets` encodes with libopus (PyAV's) for
the CLI, tests and benchmarks. What each costs in WER: docs/streams.md, "Opus on
narrow links".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import av
import numpy as np

from voxwire.audio.decoding import SAMPLE_RATE, Audio, float32_to_pcm16le, pcm16le_to_float32
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.libopus import OpusLibrary, UndecodablePacketError
from voxwire.audio.resample import StreamResampler, resample
from voxwire.core.errors import AudioError
from voxwire.core.metrics import STREAM_BAD_FRAMES
from voxwire_client.encodings import OPUS_FRAME_MS, AudioEncoding, chunk_bytes

_OPUS_RATE = 48_000  # FFmpeg's Opus decoder always gives 48 kHz
OPUS_LOOKAHEAD_SAMPLES = 104
"""The libopus encoder's look-ahead at 16 kHz (312 samples at 48 kHz, 6.5 ms),
dropped from the start of a decoded stream."""


class BadFrameError(AudioError):
    """A live chunk that does not decode in the stream's codec; its time was
    filled with silence."""

    code = "bad_frame"


class ChunkDecoder(Protocol):
    """Turns a stream's chunks, in order, into 16 kHz mono float32 samples."""

    def decode(self, chunk: bytes) -> Audio:
        """The samples of ``chunk``; may raise :class:`AudioError` when the chunk
        is unusable and nothing can stand in for it."""
        ...

    def take_error(self) -> AudioError | None:
        """The error of a chunk decoded as a stand-in since the last call, once."""
        ...


class Pcm16Decoder:
    """PCM16LE mono chunks at ``sample_rate``: stateless at 16 kHz."""

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self._resampler = StreamResampler(sample_rate)

    def decode(self, chunk: bytes) -> Audio:
        if len(chunk) % 2:
            rate = self._resampler.source_rate
            raise AudioError(
                f"a pcm16 chunk must hold whole 2-byte samples, got {len(chunk)} bytes",
                hint=f"send PCM16LE mono at {rate} Hz: 20 ms is "
                f"{chunk_bytes(AudioEncoding.PCM16, rate, 20)} bytes",
            )
        return self._resampler.push(pcm16le_to_float32(chunk))

    def take_error(self) -> AudioError | None:
        return None


class G711Decoder:
    """G.711 chunks (mu-law or A-law) at ``sample_rate``, one byte per sample."""

    def __init__(self, law: Law, sample_rate: int = 8_000) -> None:
        self.law = law
        self._resampler = StreamResampler(sample_rate)

    def decode(self, chunk: bytes) -> Audio:
        return self._resampler.push(g711_to_float32(chunk, self.law))

    def take_error(self) -> AudioError | None:
        return None


class OpusDecoder:
    """One Opus packet per chunk, decoded with the state of the packets before it."""

    def __init__(
        self, frame_ms: int = 20, *, from_start: bool = True, library: OpusLibrary | None = None
    ) -> None:
        """``from_start``: the first packet is the stream's first, so the
        encoder's look-ahead is dropped (a decoder taking a stream over at a
        later packet keeps its samples aligned without dropping any).
        ``library``: decode with this libopus and LACE (None: FFmpeg's decoder)."""
        if frame_ms not in OPUS_FRAME_MS:
            raise ValueError(f"an Opus frame of {frame_ms} ms is not one of {OPUS_FRAME_MS}")
        self.frame_ms = frame_ms
        self.bad_frames = 0
        self._error: AudioError | None = None
        self._packets: _Packets = (
            _FfmpegPackets() if library is None else library.decoder(SAMPLE_RATE)
        )
        self._skip = OPUS_LOOKAHEAD_SAMPLES if from_start else 0  # still to drop

    def decode(self, chunk: bytes) -> Audio:
        try:
            samples = self._packets.decode(chunk)
        except UndecodablePacketError as exc:
            return self._bad(len(chunk), str(exc))
        if self._skip:
            dropped = min(self._skip, samples.size)
            samples, self._skip = samples[dropped:], self._skip - dropped
        return samples

    def take_error(self) -> AudioError | None:
        error, self._error = self._error, None
        return error

    def _bad(self, size: int, why: str) -> Audio:
        self.bad_frames += 1
        STREAM_BAD_FRAMES.labels(AudioEncoding.OPUS.value).inc()
        self._error = BadFrameError(
            f"an Opus packet of {size} bytes did not decode ({why}); "
            f"{self.frame_ms} ms of silence stand in for it",
            hint="send one whole Opus packet (RFC 6716) per chunk, as the encoder made it",
        )
        return np.zeros(self.frame_ms * SAMPLE_RATE // 1000, dtype=np.float32)


class _Packets(Protocol):
    def decode(self, packet: bytes) -> Audio:
        """The 16 kHz samples of ``packet``; UndecodablePacketError when it does not decode."""
        ...


class _FfmpegPackets:
    """FFmpeg's Opus decoder (48 kHz), resampled to 16 kHz."""

    def __init__(self) -> None:
        self._codec = _opus_decoder()
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)

    def decode(self, packet: bytes) -> Audio:
        if not packet:  # an empty packet would flush FFmpeg's decoder for good
            raise UndecodablePacketError("it is empty")
        try:
            frames = self._codec.decode(av.Packet(packet))
            pieces = [_samples(out) for frame in frames for out in self._resampler.resample(frame)]
        except av.FFmpegError as exc:
            self._codec = _opus_decoder()  # a failed decoder may refuse all that follows
            raise UndecodablePacketError(str(exc)) from exc
        return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.float32)


def chunk_decoder(
    codec: AudioEncoding,
    frame_ms: int = 20,
    *,
    sample_rate: int = SAMPLE_RATE,
    from_start: bool = True,
    opus: OpusLibrary | None = None,
) -> ChunkDecoder:
    """A fresh decoder for a stream sending ``codec`` chunks at ``sample_rate``
    (Opus: whatever rate), from its first chunk or (``from_start`` false) from a
    later one; Opus with the ``opus`` library's decoder when given, else FFmpeg's."""
    if codec is AudioEncoding.OPUS:
        return OpusDecoder(frame_ms, from_start=from_start, library=opus)
    if codec is AudioEncoding.PCM16:
        return Pcm16Decoder(sample_rate)
    return G711Decoder(Law(codec.value), sample_rate)


def sample_chunks(
    samples: Audio, encoding: AudioEncoding, sample_rate: int, chunk_ms: int = 100
) -> list[bytes]:
    """16 kHz mono ``samples`` as a PCM16 or G.711 stream at ``sample_rate`` sends
    them, in chunks of ``chunk_ms`` (for the command line, tests and benchmarks)."""
    audio = resample(samples, SAMPLE_RATE, sample_rate)
    if encoding is AudioEncoding.PCM16:
        data = float32_to_pcm16le(audio)
    else:
        data = float32_to_g711(audio, Law(encoding.value), sample_rate)
    size = chunk_bytes(encoding, sample_rate, chunk_ms)
    return [data[start : start + size] for start in range(0, len(data), size)]


def opus_packets(
    samples: Audio, *, bitrate: int = 24_000, frame_ms: int = 20, application: str = "audio"
) -> Iterator[bytes]:
    """Encode 16 kHz mono ``samples`` as Opus packets of ``frame_ms`` (libopus,
    ``bitrate`` bits per second, ``application`` audio, voip or lowdelay: audio,
    as voip's high-pass at 60-100 Hz costs words of low voices); the
    last frame is padded with silence."""
    if frame_ms not in OPUS_FRAME_MS:
        raise ValueError(f"an Opus frame of {frame_ms} ms is not one of {OPUS_FRAME_MS}")
    encoder = av.CodecContext.create("libopus", "w")
    assert isinstance(encoder, av.AudioCodecContext)
    encoder.sample_rate = SAMPLE_RATE
    encoder.layout = "mono"
    encoder.format = "s16"
    encoder.bit_rate = bitrate
    encoder.options = {"frame_duration": str(frame_ms), "application": application}
    encoder.open()
    step = frame_ms * SAMPLE_RATE // 1000
    pcm = np.clip(samples * 32768.0, -32768, 32767).astype(np.int16)
    for start in range(0, len(pcm), step):
        block = pcm[start : start + step]
        block = np.pad(block, (0, step - len(block)))
        frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = start
        yield from (bytes(packet) for packet in encoder.encode(frame))
    yield from (bytes(packet) for packet in encoder.encode(None))


def _opus_decoder() -> av.AudioCodecContext:
    codec = av.CodecContext.create("opus", "r")
    assert isinstance(codec, av.AudioCodecContext)
    codec.sample_rate = _OPUS_RATE
    codec.layout = "mono"
    return codec


def _samples(frame: av.AudioFrame) -> Audio:
    return np.asarray(frame.to_ndarray(), dtype=np.float32).reshape(-1)
