"""Silencing spans of PCM: padded, merged, zero inside, untouched outside."""

from __future__ import annotations

import numpy as np
import pytest

from voxwire.audio.silencing import duration_ms, padded, silence


def test_spans_are_padded_kept_inside_the_audio_and_merged_where_they_meet() -> None:
    spans = [(1_000, 1_200), (50, 80), (1_350, 1_500), (3_000, 3_000), (9_950, 10_200)]
    assert padded(spans, 100, 10_000) == ((0, 180), (900, 1_600), (2_900, 3_100), (9_850, 10_000))
    assert padded([], 100, 10_000) == ()
    with pytest.raises(ValueError, match="negative"):
        padded(spans, -1, 10_000)


def test_silence_zeroes_the_spans_and_leaves_the_rest_as_it_was() -> None:
    rng = np.random.default_rng(7)
    samples = rng.integers(-20_000, 20_000, 16_000, dtype=np.int16)  # 1 s
    pcm = samples.tobytes()
    assert duration_ms(pcm) == 1_000
    out = np.frombuffer(silence(pcm, ((100, 250), (900, 1_200))), dtype=np.int16)
    assert out.shape == samples.shape
    assert not out[1_600:4_000].any() and not out[14_400:].any()
    kept = np.r_[0:1_600, 4_000:14_400]
    assert np.array_equal(out[kept], samples[kept])
