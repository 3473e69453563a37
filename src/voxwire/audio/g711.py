"""G.711 (ITU-T), the telephone network's 8-bit companded samples: mu-law in
North America and Japan, A-law elsewhere.

Decoding is a lookup in the 256 values FFmpeg's ``pcm_mulaw``/``pcm_alaw``
decoders give each byte (built once, then a numpy index per chunk: a 20 ms
telephone frame costs a microsecond, not an FFmpeg call). Encoding (for the
command line, tests and benchmarks) is FFmpeg's encoder. Any byte is a valid
sample, so G.711 has no bad frames; ``audioop``, the standard library's codec,
is gone from Python 3.13.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache

import av
import numpy as np

from voxwire.audio.samples import Audio


class Law(StrEnum):
    """The companding law, named as streams name it."""

    MULAW = "mulaw"
    ALAW = "alaw"

    @property
    def ffmpeg(self) -> str:
        return f"pcm_{self.value}"


@cache
def _table(law: Law) -> Audio:
    codec = av.CodecContext.create(law.ffmpeg, "r")
    assert isinstance(codec, av.AudioCodecContext)
    codec.sample_rate = 8_000
    codec.layout = "mono"
    frames = codec.decode(av.Packet(bytes(range(256))))
    values = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    table = (values.astype(np.float32) / 32768.0).astype(np.float32)
    table.flags.writeable = False
    return table


def g711_to_float32(data: bytes, law: Law) -> Audio:
    """The samples of G.711 bytes, float32 in [-1, 1), at the rate they were made."""
    return _table(law)[np.frombuffer(data, dtype=np.uint8)]


def float32_to_g711(samples: Audio, law: Law, sample_rate: int = 8_000) -> bytes:
    """G.711 bytes of ``samples`` (mono, already at ``sample_rate``)."""
    encoder = av.CodecContext.create(law.ffmpeg, "w")
    assert isinstance(encoder, av.AudioCodecContext)
    encoder.sample_rate = sample_rate
    encoder.layout = "mono"
    encoder.format = "s16"
    encoder.open()
    pcm = np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16)
    frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = sample_rate
    frame.pts = 0
    packets = [*encoder.encode(frame), *encoder.encode(None)]
    return b"".join(bytes(p) for p in packets)
