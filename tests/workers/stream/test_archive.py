"""A live stream's audio archive: parts as the stream goes, joined in stream order
(overlaps from a takeover kept once, gaps as silence)."""

from __future__ import annotations

import numpy as np

from voxwire.audio.codecs import Pcm16Decoder
from voxwire.audio.decoding import float32_to_pcm16le
from voxwire.workers.stream.archive import AudioParts, join_parts, part_name


def _pcm(samples: int, value: float) -> bytes:
    return float32_to_pcm16le(np.full(samples, value, dtype=np.float32))


def test_the_decoded_audio_comes_out_in_parts_and_joins_back() -> None:
    parts = AudioParts(part_samples=1000)
    decoder = parts.decoder(Pcm16Decoder(), first_sample=0)
    chunks = [_pcm(400, 0.1 * n) for n in range(6)]  # 2400 samples
    for chunk in chunks:
        decoder.decode(chunk)
    written = parts.take()
    assert [name for name, _ in written] == [part_name(0), part_name(1200)]
    assert parts.take() == []
    assert parts.flush() == []  # nothing left over
    assert join_parts(dict(written)) == b"".join(chunks)


def test_a_resumed_stream_overlaps_and_a_lost_stretch_is_silence() -> None:
    first = _pcm(1000, 0.5)
    resumed = _pcm(800, 0.25)  # another worker went on from sample 600
    later = _pcm(100, -0.5)  # and a part after a stretch nobody wrote
    joined = join_parts(
        {part_name(0): first, part_name(600): resumed, part_name(2000): later, "other": b"x"}
    )
    assert len(joined) == 2100 * 2
    assert joined[:2000] == first
    assert joined[2000:2800] == resumed[800:]  # samples 1000-1400 from the resumed part
    assert joined[2800:4000] == bytes(1200)
    assert joined[4000:] == later


def test_audio_that_does_not_follow_on_starts_a_part_of_its_own() -> None:
    parts = AudioParts(part_samples=10_000)
    assert parts.add(0, np.zeros(100, dtype=np.float32)) == []
    (part,) = parts.add(500, np.zeros(100, dtype=np.float32))
    assert part == (part_name(0), bytes(200))
    assert parts.flush() == [(part_name(500), bytes(200))]
