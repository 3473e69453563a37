"""libopus's own decoder, through ctypes, with its speech enhancement on.

libopus 1.5 added OSCE to its decoder: LACE, a small neural network that cleans up
SILK-coded speech (the mode Opus uses for speech at low bitrates), on when the
decoder's complexity is :data:`LACE_COMPLEXITY` or more. It changes nothing in
the stream: any Opus packet from any encoder decodes, only better. FFmpeg's Opus
decoder (the one PyAV bundles) has none of it, nor has the libopus of most Linux
distributions; ``voxwire models install opus-lace`` builds a libopus with it
(:mod:`voxwire.models.opus`). What the engine hears is closer to what was said:
Whisper's log-mel features of LACE's output are closer to those of the audio
before coding than FFmpeg's are, on every eval recording tried at 16 kbit/s;
the WER it saves: docs/streams.md, "Opus on narrow links".

This module binds the few C functions a decoder needs. Nothing here finds or
builds the library: :class:`OpusLibrary` is given its path.
"""

from __future__ import annotations

import ctypes
import weakref
from pathlib import Path

import numpy as np

from voxwire.audio.decoding import Audio
from voxwire.core.errors import ModelError

__all__ = ["LACE_COMPLEXITY", "OpusLibrary", "OpusPacketDecoder", "UndecodablePacketError"]

LACE_COMPLEXITY = 6
"""The decoder complexity that turns LACE on (5: deep packet-loss concealment
only; 7: NoLACE, a larger network that read no better on the eval recordings)."""
_SET_COMPLEXITY = 4010  # OPUS_SET_COMPLEXITY_REQUEST
_GET_COMPLEXITY = 4011  # OPUS_GET_COMPLEXITY_REQUEST
_MAX_FRAME_SAMPLES = 5760  # 120 ms at 48 kHz: the longest packet Opus has


class UndecodablePacketError(ValueError):
    """A packet libopus refused (its reason in the message)."""


class OpusLibrary:
    """A libopus shared library, loaded; makes decoders."""

    def __init__(self, path: Path) -> None:
        """Raises :class:`ModelError` when ``path`` is not a loadable libopus."""
        try:
            lib = ctypes.CDLL(str(path))
            lib.opus_get_version_string.restype = ctypes.c_char_p
            lib.opus_strerror.restype = ctypes.c_char_p
            lib.opus_strerror.argtypes = [ctypes.c_int]
            lib.opus_decoder_create.restype = ctypes.c_void_p
            lib.opus_decoder_create.argtypes = [
                ctypes.c_int32, ctypes.c_int, ctypes.POINTER(ctypes.c_int)
            ]  # fmt: skip
            lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
            lib.opus_decode_float.restype = ctypes.c_int
            lib.opus_decode_float.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int,
            ]  # fmt: skip
        except (OSError, AttributeError) as exc:
            raise ModelError(
                f"{path} is not a usable libopus ({exc})",
                hint=f"delete {path.parent}, then voxwire models install opus-lace",
            ) from exc
        self.path = path
        self._lib = lib
        self.version: str = lib.opus_get_version_string().decode()

    def decoder(self, rate: int, complexity: int = LACE_COMPLEXITY) -> OpusPacketDecoder:
        """A decoder of mono packets to ``rate`` Hz (8, 12, 16, 24 or 48 kHz)."""
        return OpusPacketDecoder(self._lib, rate, complexity)


class OpusPacketDecoder:
    """One Opus stream's decoder: packets in order, float samples out."""

    def __init__(self, lib: ctypes.CDLL, rate: int, complexity: int) -> None:
        error = ctypes.c_int()
        handle = lib.opus_decoder_create(rate, 1, ctypes.byref(error))
        if error.value or not handle:
            raise ValueError(f"libopus cannot decode at {rate} Hz: {_reason(lib, error.value)}")
        self._lib, self._handle = lib, ctypes.c_void_p(handle)
        weakref.finalize(self, lib.opus_decoder_destroy, self._handle)
        code = lib.opus_decoder_ctl(
            self._handle, ctypes.c_int(_SET_COMPLEXITY), ctypes.c_int(complexity)
        )
        if code:
            raise ValueError(f"libopus refused complexity {complexity}: {_reason(lib, code)}")
        self._out = (ctypes.c_float * _MAX_FRAME_SAMPLES)()

    @property
    def complexity(self) -> int:
        """The complexity the decoder runs at, as libopus reports it."""
        value = ctypes.c_int()
        self._lib.opus_decoder_ctl(self._handle, ctypes.c_int(_GET_COMPLEXITY), ctypes.byref(value))
        return value.value

    def decode(self, packet: bytes) -> Audio:
        """The samples of ``packet``; :class:`UndecodablePacketError` when libopus
        refuses it (the decoder's state is then as before, ready for the next)."""
        if not packet:
            raise UndecodablePacketError("it is empty")
        count = self._lib.opus_decode_float(
            self._handle, packet, len(packet), self._out, _MAX_FRAME_SAMPLES, 0
        )
        if count < 0:
            raise UndecodablePacketError(_reason(self._lib, count))
        return np.ctypeslib.as_array(self._out)[:count].copy()


def _reason(lib: ctypes.CDLL, code: int) -> str:
    said: bytes = lib.opus_strerror(code)
    return said.decode()
