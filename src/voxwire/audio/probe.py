"""What an audio upload is, before it is decoded: its first bytes and the
length its headers declare.

:func:`open_source` reads the first :data:`HEAD_BYTES` of any input (bytes, a
path, a seekable or non-seekable file) without consuming them;
:func:`declared_seconds` says how long a trustworthy header says the audio is
(WAV ``data`` chunk parsed here, FLAC STREAMINFO and MP4 ``moov`` via FFmpeg, an
MP3 Xing/Info/VBRI header), which :mod:`voxwire.audio.decoding` compares with what
decodes to tell a truncated file from a complete one; :func:`magic_format` names
a format from its magic bytes for error messages.
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path
from typing import BinaryIO

import av

HEAD_BYTES = 64 * 1024
"""How much of an input is read ahead to recognise it."""

_TRUSTED_FFMPEG_DURATION = ("flac", "mov")  # formats whose headers state the length


def open_source(
    source: bytes | bytearray | memoryview | Path | BinaryIO,
) -> tuple[BinaryIO, int | None, bytes, bool]:
    """Return (file object, size or None, first bytes, whether we own the file)."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return io.BytesIO(data), len(data), data[:HEAD_BYTES], True
    if isinstance(source, str):
        raise TypeError(
            "decode() takes bytes, a Path or a binary file, not str; wrap paths in Path"
        )
    if isinstance(source, os.PathLike):
        file: BinaryIO = open(source, "rb")  # noqa: SIM115 - closed by decode()
        size = os.fstat(file.fileno()).st_size
        head = file.read(HEAD_BYTES)
        file.seek(0)
        return file, size, head, True
    if source.seekable():
        size = source.seek(0, io.SEEK_END)
        source.seek(0)
        head = source.read(HEAD_BYTES)
        source.seek(0)
        return source, size, head, False
    head = source.read(HEAD_BYTES)
    return io.BufferedReader(_PrefixedReader(head, source)), None, head, False


class _PrefixedReader(io.RawIOBase):
    """A non-seekable stream whose first bytes were already read for sniffing."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        chunk = self._rest.read(len(view))
        view[: len(chunk)] = chunk
        return len(chunk)


def declared_seconds(
    container: av.container.InputContainer, stream: av.AudioStream, head: bytes, size: int | None
) -> tuple[float | None, float | None]:
    """(seconds a trustworthy header declares, seconds the file can hold), or Nones.

    The two differ only for a WAV whose ``data`` chunk is larger than the file.
    """
    fmt = container.format.name
    if fmt == "wav":
        return _wav_declared_seconds(head, size)
    trusted = fmt.split(",")[0] in _TRUSTED_FFMPEG_DURATION or (
        fmt == "mp3" and _has_mp3_length_header(head)
    )
    seconds: float | None = None
    if not trusted:
        pass
    elif stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration is not None and container.duration > 0:
        seconds = container.duration / 1_000_000
    return seconds, seconds


def _wav_declared_seconds(head: bytes, size: int | None) -> tuple[float | None, float | None]:
    """Seconds the RIFF ``data`` chunk declares and seconds the file holds.

    Nones when the header is not plain RIFF/WAVE (RF64, W64) or leaves the
    size unset (0 or 0xFFFFFFFF, as streaming writers do).
    """
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None, None
    pos, block_align, rate = 12, 0, 0
    while pos + 8 <= len(head):
        chunk_id, chunk_size = head[pos : pos + 4], struct.unpack_from("<I", head, pos + 4)[0]
        if chunk_id == b"fmt " and pos + 24 <= len(head):
            _, _, rate, _, block_align = struct.unpack_from("<HHIIH", head, pos + 8)
        elif chunk_id == b"data":
            if block_align == 0 or rate == 0 or chunk_size in (0, 0xFFFFFFFF):
                return None, None
            declared = chunk_size // block_align / rate
            if size is None:
                return declared, declared
            held = max(0, min(chunk_size, size - pos - 8))
            return declared, held // block_align / rate
        pos += 8 + chunk_size + (chunk_size & 1)
    return None, None


def _has_mp3_length_header(head: bytes) -> bool:
    """Whether the first MP3 frame carries a Xing, Info or VBRI header."""
    start = 0
    if head[:3] == b"ID3" and len(head) >= 10:
        tag = head[6:10]
        start = 10 + (tag[0] << 21 | tag[1] << 14 | tag[2] << 7 | tag[3])
        start += 10 if head[5] & 0x10 else 0  # footer present
    while start + 1 < len(head) and not (head[start] == 0xFF and head[start + 1] & 0xE0 == 0xE0):
        start += 1
        if start > 4096 + 10:
            return False
    frame = head[start : start + 200]
    return any(tag in frame for tag in (b"Xing", b"Info", b"VBRI"))


def magic_format(head: bytes) -> str | None:
    """Name an audio format recognised from its first bytes, for error messages."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[:4] == b"OggS":
        return "Ogg"
    if head[4:8] == b"ftyp":
        return "MP4/M4A"
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "WebM/Matroska"
    return None
