"""A live stream's audio archive: parts as the stream goes, joined in stream order
(overlaps from a takeover kept once, gaps as silence); a redacted stream's parts
held until its finals are settled past them, then silenced where they redact."""

from __future__ import annotations

import numpy as np

from voxwire.audio.codecs import Pcm16Decoder
from voxwire.audio.decoding import float32_to_pcm16le
from voxwire.audio.silencing import REDACTION_PAD_MS, padded, silence
from voxwire.workers.stream.archive import (
    PAD_SAMPLES,
    AudioParts,
    join_parts,
    part_name,
    silenced_part,
)
from voxwire_client.messages import SegmentData, WordData


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


def _final(start_ms: int, end_ms: int, redacted: tuple[int, int]) -> SegmentData:
    """A final with one word and one redacted word at ``redacted`` (ms)."""
    words = (
        WordData(word=" card", start_ms=start_ms, end_ms=start_ms + 100, probability=0.9),
        WordData(word=" [CREDIT_CARD]", start_ms=redacted[0], end_ms=redacted[1], probability=0.9),
    )
    return SegmentData(
        id="s-0", index=0, start_ms=start_ms, end_ms=end_ms, text="card [CREDIT_CARD]", words=words
    )


def test_a_redacted_streams_part_waits_until_its_finals_are_settled_past_its_end() -> None:
    parts = AudioParts(part_samples=16_000)  # parts of a second
    decoder = parts.decoder(Pcm16Decoder(), first_sample=0)
    for _ in range(25):
        decoder.decode(_pcm(1_600, 0.5))  # 2.5 s: two full parts, half a second held
    assert parts.take(settled=16_000) == []  # a redacted word may start just after 1 s
    (first,) = parts.take(settled=16_000 + PAD_SAMPLES)
    assert first[0] == part_name(0)
    assert parts.take(settled=20_000) == []
    assert [name for name, _ in parts.take()] == [part_name(16_000)]  # unredacted: at once


def test_a_part_is_silenced_where_its_finals_redact_and_kept_elsewhere() -> None:
    pcm = _pcm(16_000, 0.5)  # the second second of the stream
    final = _final(500, 1_900, redacted=(1_300, 1_500))  # silenced: 1200-1600 ms
    name, silenced = silenced_part((part_name(16_000), pcm), [final])
    samples = np.frombuffer(silenced, dtype="<i2")
    sent = np.frombuffer(pcm, dtype="<i2")
    assert name == part_name(16_000)
    assert not samples[200 * 16 : 600 * 16].any()
    assert np.array_equal(samples[: 200 * 16], sent[: 200 * 16])
    assert np.array_equal(samples[600 * 16 :], sent[600 * 16 :])
    # the part joined with the rest is what the whole stream silenced gives, to the sample
    whole = _pcm(32_000, 0.5)
    assert silence(whole, padded([(1_300, 1_500)], REDACTION_PAD_MS, 2_000))[32_000:] == silenced
    assert silenced_part((part_name(40_000), pcm), [final])[1] == pcm  # after the final
