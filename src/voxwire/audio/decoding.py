"""Decode uploaded audio into the samples the engines expect.

:func:`decode` turns a WAV, FLAC, MP3, OGG (Opus, Vorbis, FLAC), M4A/AAC,
WebM/Matroska, ... file of any sample rate and channel count into float32 mono
samples at 16 kHz (:data:`Audio`), using PyAV (FFmpeg).
:func:`pcm16le_to_float32` converts the raw PCM chunks that streaming clients
send.

Every failure is a typed :class:`voxwire.core.errors.AudioError` with a hint; FFmpeg
errors never escape::

    EmptyAudioError        no bytes at all
    UnsupportedAudioError  not audio, a container outside ALLOWED_FORMATS,
                           or a file (video, image) without an audio stream
    TruncatedAudioError    the file ends before its audio does, or is damaged
    AudioTooLongError      more than ``max_seconds`` of audio
    AudioError             decoding ran past its time limit

Truncated and damaged files. A file counts as truncated when

* nothing could be decoded from a recognisable audio file (a WAV header
  without data, a FLAC or MP3 cut before its first frame), or
* the decoder or demuxer hit corrupt data (FFmpeg raises on the partial last
  frame of a FLAC cut in half, on garbage inside an MP3, ...), or
* fewer samples came out than a trustworthy header declares
  (:mod:`voxwire.audio.probe`): the WAV ``data`` chunk size (parsed there:
  FFmpeg silently clamps it to the file size), FLAC STREAMINFO, the MP4
  ``moov`` atom, an MP3 Xing/Info/VBRI header. Durations
  FFmpeg merely estimates (MP3 without such a header, ADTS AAC) or reads from
  the end of the file (Ogg) are not trusted, so a clean cut of such a file
  decodes as a shorter, complete file.

By default a truncated file raises :class:`TruncatedAudioError`, whose message
says how much was readable: a cut upload is almost always a mistake the user
wants to hear about. With ``allow_truncated=True`` the readable prefix is
returned instead, marked ``truncated=True`` (decoding stops at the first
corrupt packet). A file from which nothing decodes always raises.

Long and hostile input. ``max_seconds`` bounds the output: a trustworthy
declared duration above it is rejected before decoding, and decoding stops as
soon as the output would exceed it, so a small file that expands to hours
(a FLAC of silence without a length in its header) costs at most
``max_seconds`` of samples. A WAV header claiming hours over a few bytes is
truncated, not long: the bytes are not there (from a pipe, whose size is
unknown, the claim alone counts and the file is too long). Absurd sample rates
or channel counts from crafted headers are refused before a resampler is
built. ``time_limit_s`` bounds the wall clock, checked between packets. Only
the demuxers in :data:`ALLOWED_FORMATS` may open the input (FFmpeg
``format_whitelist``), and FFmpeg may not open any other file or URL: playlists
(HLS, concat) that reference other files are refused. Paths are opened by
Python, never handed to FFmpeg as URLs.

Raw G.711. Telephone systems store calls as bare mu-law or A-law bytes
without a header (``.ul``, ``.al``): nothing in the bytes says what they are,
so such a file is recognised by its name (:func:`raw_format`), mono at 8 kHz
unless the caller declares another rate. G.711 in a WAV (format tags 7 and 6)
has a header and decodes as any WAV.

Down-mixing averages the channels; samples are clipped to [-1, 1] (lossy
decoders overshoot a little). With ``separate`` each channel is kept as well, as
its own track (:attr:`DecodedAudio.tracks`, resampled the same way): a call
recorder's stereo, one party per channel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import av
import av.error
import numpy as np

from voxwire.audio.probe import declared_seconds, magic_format, open_source
from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.errors import (
    AudioError,
    AudioTooLongError,
    EmptyAudioError,
    TruncatedAudioError,
    UnsupportedAudioError,
)

__all__ = [
    "ALLOWED_FORMATS", "SAMPLE_RATE", "Audio", "DecodedAudio", "RawFormat", "decode",
    "pcm16le_to_float32", "raw_format",
]  # fmt: skip


ALLOWED_FORMATS: tuple[str, ...] = (
    "wav", "w64", "flac", "mp3", "ogg", "mov", "matroska", "aac",
    "aiff", "caf", "amr", "au", "wv", "avi",
)  # fmt: skip
"""FFmpeg demuxers that may open an upload (``mov`` covers MP4/M4A/3GP,
``matroska`` covers WebM, ``ogg`` covers Opus and Vorbis)."""

DEFAULT_MAX_SECONDS = 4 * 3600.0
_DURATION_SLACK_S = 0.25  # tolerance between declared and decoded duration
_MIN_RATE, _MAX_RATE = 1_000, 768_000  # Hz
_MAX_CHANNELS = 64  # libswresample's limit


RAW_G711: dict[str, str] = {".ul": "mulaw", ".mulaw": "mulaw", ".al": "alaw", ".alaw": "alaw"}
"""File name endings of headerless G.711 and the FFmpeg demuxer that reads them."""

RAW_RATES = (8_000, 16_000)
"""The sample rates a raw G.711 file may be declared at."""


@dataclass(frozen=True, slots=True)
class RawFormat:
    """Headerless mono audio: the FFmpeg demuxer that reads it and its sample rate."""

    demuxer: str
    sample_rate: int = 8_000


def raw_format(name: str | None, sample_rate: int | None = None) -> RawFormat | None:
    """The raw G.711 format of a file called ``name`` (``.ul``, ``.al``), at
    ``sample_rate`` (None: 8 kHz); None for a name of any other kind. Raises
    :class:`UnsupportedAudioError` for a rate G.711 is not sent at."""
    suffix = Path((name or "").replace("\\", "/")).suffix.lower()
    demuxer = RAW_G711.get(suffix)
    if demuxer is None:
        return None
    rate = sample_rate or RAW_RATES[0]
    if rate not in RAW_RATES:
        raise UnsupportedAudioError(
            f"a raw G.711 file at {rate} Hz is not supported",
            hint=f"declare sample_rate {' or '.join(map(str, RAW_RATES))}",
        )
    return RawFormat(demuxer, rate)


@dataclass(frozen=True, slots=True)
class DecodedAudio:
    """Decoded audio and what it was decoded from."""

    samples: Audio
    """Mono float32 samples at :data:`SAMPLE_RATE`."""
    duration_s: float
    source_format: str
    """FFmpeg demuxer name, e.g. ``"wav"``, ``"mp3"``, ``"mov,mp4,m4a,3gp,3g2,mj2"``."""
    source_rate: int
    source_channels: int
    source_codec: str = ""
    """FFmpeg decoder name, e.g. ``"pcm_s16le"``, ``"flac"``, ``"opus"``."""
    truncated: bool = False
    """True when the file was cut off or damaged and ``allow_truncated`` kept the prefix."""
    tracks: tuple[Audio, ...] = ()
    """Decoded with ``separate``: each channel's samples (as long as ``samples``),
    in the file's channel order; empty otherwise."""


def pcm16le_to_float32(data: bytes) -> Audio:
    """Convert little-endian signed 16-bit PCM to float32 in [-1, 1).

    Raises :class:`AudioError` when ``data`` holds an odd number of bytes.
    """
    if len(data) % 2:
        raise AudioError(
            f"PCM16LE data must hold whole 2-byte samples, got {len(data)} bytes",
            hint="send 16-bit little-endian mono samples; do not split a sample across chunks",
        )
    samples = np.frombuffer(data, dtype="<i2").astype(np.float32)
    samples *= 1.0 / 32768.0
    return samples


def float32_to_pcm16le(samples: Audio) -> bytes:
    """The inverse of :func:`pcm16le_to_float32`, clipping to the 16-bit range."""
    return bytes(np.clip(samples * 32768.0, -32768, 32767).astype("<i2").tobytes())


@dataclass(slots=True)
class _Limits:
    max_samples: int
    max_seconds: float
    deadline: float
    time_limit_s: float
    label: str


def decode(
    source: bytes | bytearray | memoryview | Path | BinaryIO,
    *,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    name: str | None = None,
    allow_truncated: bool = False,
    time_limit_s: float | None = None,
    raw: RawFormat | None = None,
    separate: bool = False,
) -> DecodedAudio:
    """Decode ``source`` to float32 mono samples at 16 kHz (and, with ``separate``,
    each channel as its own track too).

    ``source`` is the file's bytes, a path, or a binary file object (a seekable
    one is read from its start). ``name`` names the input in error messages.
    ``allow_truncated`` returns the readable prefix of a cut or damaged file
    instead of raising (see the module docstring). ``time_limit_s`` bounds the
    decoding wall clock; by default 30 s plus 1 s per 50 s of ``max_seconds``.

    Raises :class:`EmptyAudioError`, :class:`UnsupportedAudioError`,
    :class:`TruncatedAudioError`, :class:`AudioTooLongError`, or
    :class:`AudioError` (time limit). A path that cannot be read raises
    :class:`OSError` as ``open`` does. ``raw``: the input is headerless audio in
    this format (None: what :func:`raw_format` makes of ``name``, if anything).
    """
    if max_seconds <= 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds}")
    label = name or (source.name if isinstance(source, Path) else "the file")
    limit_s = 30.0 + max_seconds / 50.0 if time_limit_s is None else time_limit_s
    limits = _Limits(
        max_samples=int(max_seconds * SAMPLE_RATE),
        max_seconds=max_seconds,
        deadline=time.monotonic() + limit_s,
        time_limit_s=limit_s,
        label=label,
    )
    file, size, head, owned = open_source(source)
    try:
        if size == 0 or not head:
            raise EmptyAudioError(
                f"{label} is empty (0 bytes)", hint="upload a file that contains audio"
            )
        raw = raw or raw_format(label)
        return _decode_file(file, size, head, limits, allow_truncated, raw, separate)
    finally:
        if owned:
            file.close()


def _nested_open_refused(*_args: object, **_kwargs: object) -> object:
    raise PermissionError("voxwire does not let FFmpeg open other files or URLs")


def _open_container(
    file: BinaryIO, head: bytes, label: str, raw: RawFormat | None = None
) -> av.container.InputContainer:
    options = {"format_whitelist": ",".join(ALLOWED_FORMATS)}
    if raw is not None:  # no header to probe: the demuxer is named
        options = {"format_whitelist": raw.demuxer, "sample_rate": str(raw.sample_rate)}
    try:
        return av.open(
            file,
            mode="r",
            format=None if raw is None else raw.demuxer,
            options=options,
            metadata_errors="replace",
            io_open=_nested_open_refused,
        )
    except av.error.ArgumentError as exc:  # FFmpeg's answer to a format off the whitelist
        raise UnsupportedAudioError(
            f"{label} is not in a supported audio format",
            hint="upload WAV, FLAC, MP3, OGG/Opus, M4A/AAC or WebM audio",
        ) from exc
    except (av.error.FFmpegError, ValueError, UnicodeDecodeError) as exc:
        kind = magic_format(head)
        if kind is not None:
            raise TruncatedAudioError(
                f"{label} looks like a {kind} file but is cut off or damaged before its audio",
                hint="upload the complete file",
            ) from exc
        raise UnsupportedAudioError(
            f"{label} is neither audio nor video that can be decoded",
            hint="upload WAV, FLAC, MP3, OGG/Opus, M4A/AAC or WebM audio",
        ) from exc


def _decode_file(
    file: BinaryIO,
    size: int | None,
    head: bytes,
    limits: _Limits,
    allow_truncated: bool,
    raw: RawFormat | None = None,
    separate: bool = False,
) -> DecodedAudio:
    with _open_container(file, head, limits.label, raw) as container:
        if not container.streams.audio:
            others = ", ".join(sorted({s.type for s in container.streams})) or "no streams"
            raise UnsupportedAudioError(
                f"{limits.label} has no audio stream ({others})",
                hint="upload a file that contains a sound track",
            )
        stream = container.streams.audio[0]
        fmt = container.format.name
        if stream.codec_context is None:
            raise UnsupportedAudioError(
                f"{limits.label} uses an audio codec that cannot be decoded ({fmt})",
                hint="convert the file to WAV, FLAC or MP3 and try again",
            )
        if stream.codec_context.sample_rate > 0 and stream.codec_context.channels > 0:
            _check_params(
                stream.codec_context.sample_rate, stream.codec_context.channels, limits.label
            )
        declared, present = declared_seconds(container, stream, head, size)
        _check_declared(declared, present, limits, allow_truncated)
        tracks = _Tracks(limits) if separate else None
        samples, damaged = _decode_stream(container, stream, present, limits, tracks)
        codec = stream.codec_context
        rate, channels, codec_name = codec.sample_rate, codec.channels, codec.name
    duration = len(samples) / SAMPLE_RATE
    if len(samples) == 0:
        raise TruncatedAudioError(
            f"{limits.label} holds no decodable audio; it is cut off or damaged",
            hint="upload the complete file",
        )
    short = declared is not None and duration < declared - _slack(declared)
    truncated = damaged or short
    if truncated and not allow_truncated:
        of = f" of the {_hms(declared)} its header declares" if declared else ""
        raise TruncatedAudioError(
            f"{limits.label} is {'damaged or cut off' if damaged else 'cut off'}: "
            f"only {_hms(duration)}{of} could be decoded",
            hint="upload the complete file",
        )
    return DecodedAudio(
        samples=samples,
        duration_s=duration,
        source_format=fmt,
        source_rate=rate,
        source_channels=channels,
        source_codec=codec_name,
        truncated=truncated,
        tracks=() if tracks is None else tracks.finish(),
    )


def _slack(declared: float) -> float:
    """How far a decoded duration may fall short of the declared one."""
    return _DURATION_SLACK_S + 0.005 * declared


def _check_declared(
    declared: float | None, present: float | None, limits: _Limits, allow_truncated: bool
) -> None:
    """Reject before decoding: bytes missing from a WAV, or a declared length over the limit."""
    if declared is None or present is None:
        return
    if present < declared - _slack(declared) and not allow_truncated:
        raise TruncatedAudioError(
            f"{limits.label} is cut off: its header declares {_hms(declared)} of audio "
            f"but the file holds only {_hms(present)}",
            hint="upload the complete file",
        )
    if present > limits.max_seconds + _DURATION_SLACK_S:
        raise AudioTooLongError(
            f"{limits.label} lasts {_hms(present)}, "
            f"more than the {_hms(limits.max_seconds)} allowed",
            hint="split the recording into shorter files",
        )


def _too_long(limits: _Limits) -> AudioTooLongError:
    return AudioTooLongError(
        f"{limits.label} is longer than the {_hms(limits.max_seconds)} allowed",
        hint="split the recording into shorter files",
    )


def _hms(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _decode_stream(
    container: av.container.InputContainer,
    stream: av.AudioStream,
    declared: float | None,
    limits: _Limits,
    tracks: _Tracks | None = None,
) -> tuple[Audio, bool]:
    """Decode, resample and down-mix (keeping each channel in ``tracks``, if
    given); return (samples, whether data was damaged)."""
    # Preallocate what the header declares, up to 10 minutes; grow by doubling after that.
    expected = int(min(declared or 60.0, 600.0) * SAMPLE_RATE) + SAMPLE_RATE
    out = _SampleBuffer(min(expected, limits.max_samples), limits)
    mixer = _MonoMixer(limits.label)
    damaged = False

    def take(planes: list[Planes]) -> None:
        for chunk in planes:
            out.append(_mono(chunk))
            if tracks is not None:
                tracks.append(chunk)

    try:
        for packet in container.demux(stream):
            if time.monotonic() > limits.deadline:
                raise AudioError(
                    f"decoding {limits.label} took longer than {limits.time_limit_s:.0f} s",
                    hint="convert the file to WAV, FLAC or MP3 and try again",
                )
            for frame in packet.decode():
                take(mixer.push(frame))
    except (av.error.FFmpegError, ValueError):
        damaged = True  # stop at the first corrupt packet; what came before is kept
    try:
        take(mixer.flush())
    except (av.error.FFmpegError, ValueError):
        damaged = True
    return out.finish(), damaged


Planes = np.ndarray
"""A resampled frame's samples: float32, (channels, samples)."""


class _MonoMixer:
    """Resample frames to 16 kHz float planes (one per channel: :func:`_mono`
    averages them).

    A new resampler is made whenever the input's format, layout or rate
    changes (chained Ogg, MP3 with a mid-stream rate switch): PyAV's resampler
    refuses frames that do not match its first one.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._resampler: av.AudioResampler | None = None
        self._key: tuple[str, str, int] | None = None

    def push(self, frame: av.AudioFrame) -> list[Planes]:
        key = (frame.format.name, frame.layout.name, frame.sample_rate)
        chunks: list[Planes] = []
        if key != self._key:
            _check_params(frame.sample_rate, len(frame.layout.channels), self._label)
            chunks.extend(self.flush())
            self._resampler = av.AudioResampler(
                format="fltp", layout=frame.layout, rate=SAMPLE_RATE
            )
            self._key = key
        assert self._resampler is not None
        chunks.extend(f.to_ndarray() for f in self._resampler.resample(frame))
        return chunks

    def flush(self) -> list[Planes]:
        if self._resampler is None:
            return []
        resampler, self._resampler, self._key = self._resampler, None, None
        return [f.to_ndarray() for f in resampler.resample(None)]


def _check_params(rate: int, channels: int, label: str) -> None:
    """Refuse parameters no real recording has: they make the resampler crawl or fail.

    A crafted WAV header can claim a rate of 2 GHz; building a resampler for it
    takes seconds, outside any per-packet time check.
    """
    if not _MIN_RATE <= rate <= _MAX_RATE:
        raise UnsupportedAudioError(
            f"{label} has a sample rate of {rate} Hz, "
            f"outside the {_MIN_RATE} to {_MAX_RATE} Hz that can be decoded",
            hint="the file is probably damaged; convert it to a standard rate such as 16 or 48 kHz",
        )
    if not 1 <= channels <= _MAX_CHANNELS:
        raise UnsupportedAudioError(
            f"{label} has {channels} audio channels; at most {_MAX_CHANNELS} can be mixed",
            hint="the file is probably damaged; export it as mono or stereo",
        )


def _mono(planes: Planes) -> Audio:
    mono = planes[0] if planes.shape[0] == 1 else planes.mean(axis=0, dtype=np.float32)
    return np.asarray(mono, dtype=np.float32)


class _Tracks:
    """Each channel's samples, as :class:`_SampleBuffer` keeps the mix; the
    channel count is the first frame's (a file whose count changes is refused)."""

    def __init__(self, limits: _Limits) -> None:
        self._limits = limits
        self._buffers: list[_SampleBuffer] = []

    def append(self, planes: Planes) -> None:
        if not self._buffers:
            self._buffers = [_SampleBuffer(SAMPLE_RATE, self._limits) for _ in planes]
        if len(planes) != len(self._buffers):
            raise UnsupportedAudioError(
                f"{self._limits.label} changes its number of channels midway",
                hint="upload it with channels mixed, or export it with a fixed channel layout",
            )
        for buffer, plane in zip(self._buffers, planes, strict=True):
            buffer.append(np.asarray(plane, dtype=np.float32))

    def finish(self) -> tuple[Audio, ...]:
        return tuple(buffer.finish() for buffer in self._buffers)


class _SampleBuffer:
    """A growable float32 buffer that refuses to grow past ``max_samples``."""

    def __init__(self, capacity: int, limits: _Limits) -> None:
        self._data = np.empty(max(capacity, SAMPLE_RATE), dtype=np.float32)
        self._n = 0
        self._limits = limits

    def append(self, chunk: Audio) -> None:
        end = self._n + len(chunk)
        if end > self._limits.max_samples:
            raise _too_long(self._limits)
        if end > len(self._data):
            grown = min(max(2 * len(self._data), end), self._limits.max_samples)
            self._data.resize(grown, refcheck=False)
        self._data[self._n : end] = chunk
        self._n = end

    def finish(self) -> Audio:
        self._data.resize(self._n, refcheck=False)
        np.clip(self._data, -1.0, 1.0, out=self._data)
        return self._data
