"""Deepgram's listening API at the gateway, without I/O: what its query
parameters become (the session's options, how answers are shaped, what is
refused), what a live connection makes of the client's frames and of the
session's voxwire messages, and the pre-recorded response. The e2e suite
(tests/e2e/test_deepgram.py) runs it all through the ``deepgram-sdk``."""

from __future__ import annotations

import io
import json
import struct
import wave
from pathlib import Path

import pytest

from voxwire.core.config import Settings
from voxwire.gateway.deepgram_api.errors import DeepgramError
from voxwire.gateway.deepgram_api.live import LiveAudioError, LiveConnection, plain
from voxwire.gateway.deepgram_api.params import (
    Listening,
    RawAudio,
    file_request,
    live_request,
    served_model,
)
from voxwire.gateway.deepgram_api.prerecorded import file_response
from voxwire.gateway.routes.deepgram import wav
from voxwire_client.api import StreamRequest, TranscriptResponse
from voxwire_client.encodings import AudioEncoding
from voxwire_client.messages import (
    ErrorMessage,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    WordData,
)
from voxwire_client.options import ChannelMode, RedactMode


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


def q(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split("=", 1)) for p in text.split("&") if p]  # type: ignore[misc]


def test_live_parameters_become_the_streams_options(settings: Settings) -> None:
    asked = live_request(
        q(
            "model=nova-3&language=en-US&encoding=mulaw&sample_rate=8000&interim_results=true"
            "&punctuate=true&diarize=true&keyterm=voxwire&keyterm=Kafka Streams&endpointing=300"
            "&utterance_end_ms=1000&vad_events=true&smart_format=true&numerals=true&tag=x"
        ),
        settings,
    )
    options = asked.options
    assert isinstance(options, StreamRequest)
    assert options.model is None  # Deepgram's own model: the platform's choice
    assert (options.language, options.encoding, options.sample_rate) == (
        "en",
        AudioEncoding.MULAW,
        8000,
    )
    assert options.vocabulary == ("voxwire", "Kafka Streams")
    assert options.diarize is not None and options.endpointing.min_silence_ms == 300
    assert asked.raw == RawAudio(AudioEncoding.MULAW, 8000, 1)
    listening = asked.listening
    assert listening.interim_results and listening.punctuate and listening.vad_events
    assert listening.utterance_end and listening.speech_final and listening.diarize


def test_live_defaults_and_endpointing(settings: Settings) -> None:
    plain_request = live_request([], settings)
    assert plain_request.raw == RawAudio()  # linear16 at 16 kHz, mono
    assert plain_request.listening == Listening()
    assert isinstance(plain_request.options, StreamRequest)
    assert plain_request.options.endpointing.min_silence_ms == 600  # voxwire's, not Deepgram's 10
    off = live_request(q("endpointing=false"), settings)
    assert not off.listening.speech_final
    short = live_request(q("endpointing=10"), settings).options
    assert isinstance(short, StreamRequest) and short.endpointing.min_silence_ms == 100
    turn = live_request(q("interim_results=true&utterance_end_ms=1500"), settings).options
    assert isinstance(turn, StreamRequest) and turn.endpointing.min_silence_ms == 1500
    assert live_request(q("language=multi"), settings).options.language == "auto"
    assert live_request(q("detect_language=true"), settings).options.language == "auto"


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("encoding=opus", "encoding=opus"),
        ("channels=2", "channels=2"),
        ("sample_rate=44100", "44100"),
        ("summarize=v2", "summarize"),
        ("profanity_filter=true", "profanity_filter"),
        ("utterance_end_ms=1000", "interim_results"),
        ("interim_results=maybe", "interim_results"),
        ("model=nova-9-turbo-x&model=whisper-huge", "whisper-huge"),
        ("callback=https://example.com/hook", None),
    ],
)
def test_what_is_refused_names_it(settings: Settings, query: str, named: str | None) -> None:
    if named is None:  # a callback is checked by the route (webhooks)
        assert live_request(q(query), settings).callback == "https://example.com/hook"
        return
    with pytest.raises(DeepgramError) as refused:
        live_request(q(query), settings)
    assert refused.value.status == 400 and named in refused.value.message
    assert refused.value.code == "Bad Request"


def test_models(settings: Settings) -> None:
    assert served_model("tiny.en", settings) == "tiny.en"
    assert served_model("whisper-tiny", settings) == "tiny.en"
    for deepgram in ("nova-3", "nova-2-phonecall", "enhanced-general", "base", None):
        assert served_model(deepgram, settings) is None
    for unknown in ("whisper-large", "gpt-4o", "tiny"):
        with pytest.raises(DeepgramError, match="No such model"):
            served_model(unknown, settings)


def test_file_parameters(settings: Settings) -> None:
    asked = file_request(
        q("model=nova-3&multichannel=true&redact=pci&redact=ssn&utterances=true&keywords=Kafka:2"),
        settings,
    )
    assert asked.options.channels is ChannelMode.SEPARATE
    assert asked.options.redact is RedactMode.ENTITY
    assert asked.options.vocabulary == ("Kafka",)
    assert asked.raw is None and asked.listening.utterances
    assert file_request(q("redact=numbers"), settings).options.redact is RedactMode.NUMBERS
    assert file_request(q("redact=false"), settings).options.redact is None
    raw = file_request(q("encoding=linear16&sample_rate=8000&channels=2"), settings).raw
    assert raw == RawAudio(AudioEncoding.PCM16, 8000, 2)
    assert file_request(q("encoding=flac"), settings).raw is None  # the container says


def test_raw_audio_is_wrapped_as_a_wav() -> None:
    pcm = struct.pack("<4h", 1, -1, 2, -2) + b"\x07"  # an odd byte left over is dropped
    with wave.open(io.BytesIO(wav(pcm, RawAudio(AudioEncoding.PCM16, 8000, 2)))) as read:
        assert (read.getnchannels(), read.getframerate(), read.getsampwidth()) == (2, 8000, 2)
        assert read.readframes(10) == pcm[:8]


def connection(listening: Listening | None = None) -> LiveConnection:
    return LiveConnection("s_live", RawAudio(), listening or Listening(), "tiny.en")


def segment(text: str, *, start: int = 0, end: int = 1000, words: bool = True) -> SegmentData:
    said = text.split()
    step = (end - start) // max(1, len(said))
    return SegmentData(
        id="a",
        index=0,
        start_ms=start,
        end_ms=end,
        text=f" {text}",
        speaker="S2",
        words=tuple(
            WordData(
                word=f" {w}",
                start_ms=start + n * step,
                end_ms=start + (n + 1) * step,
                probability=0.8,
            )
            for n, w in enumerate(said)
        )
        if words
        else (),
    )


def test_results_is_final_and_speech_final() -> None:
    live = connection(
        Listening(interim_results=True, punctuate=True, utterance_end=True, vad_events=True)
    )
    partial = SegmentMessage(
        sid="s_live", seq=2, type="partial", segment=segment("Hello, wor", words=False)
    )
    final = SegmentMessage(
        sid="s_live", seq=3, type="final", segment=segment("Hello, world.", start=500, end=2000)
    )
    [interim] = live.translate(partial)
    assert (interim.type, interim.is_final, interim.speech_final) == ("Results", False, False)  # type: ignore[union-attr]
    results, end = live.translate(final)
    assert results.type == "Results" and results.is_final and results.speech_final  # type: ignore[union-attr]
    assert (results.start, results.duration) == (0.5, 1.5)  # type: ignore[union-attr]
    alternative = results.channel.alternatives[0]  # type: ignore[union-attr]
    assert alternative.transcript == "Hello, world."
    assert [(w.word, w.punctuated_word, w.speaker) for w in alternative.words] == [
        ("hello", "Hello,", 1),
        ("world", "world.", 1),
    ]
    assert alternative.confidence == 0.8 and results.metadata.request_id == "s_live"  # type: ignore[union-attr]
    assert end.type == "UtteranceEnd" and end.last_word_end == 2.0  # type: ignore[union-attr]
    speech = ProgressMessage(
        sid="s_live",
        seq=4,
        status=SessionStatus.TRANSCRIBING,
        percent=0,
        processed_ms=2500,
        speech=True,
    )
    [started] = live.translate(speech)
    assert started.type == "SpeechStarted" and started.timestamp == 2.5  # type: ignore[union-attr]
    assert live.translate(speech) == []  # still speaking: one SpeechStarted per start


def test_results_without_interims_punctuation_or_endpointing() -> None:
    live = connection(Listening(speech_final=False))
    partial = SegmentMessage(sid="s_live", seq=2, type="partial", segment=segment("Hello"))
    assert live.translate(partial) == []
    [final] = live.translate(
        SegmentMessage(sid="s_live", seq=3, type="final", segment=segment("Don't stop, Mr. Smith!"))
    )
    assert final.channel.alternatives[0].transcript == "don't stop mr smith"  # type: ignore[union-attr]
    assert final.is_final and not final.speech_final  # type: ignore[union-attr]
    cut = connection()
    long = segment("and on", start=0, end=30_000)
    [results] = cut.translate(SegmentMessage(sid="s_live", seq=4, type="final", segment=long))
    assert not results.speech_final  # type: ignore[union-attr]  # cut at max_segment_s: the turn goes on
    failed = ErrorMessage(sid="s_live", seq=5, code="engine", message="it broke")
    [error] = live.translate(failed)
    assert error.type == "Error" and error.description == "it broke"  # type: ignore[union-attr]


def test_a_flushed_final_is_from_finalize() -> None:
    """The final the stream's flush (Deepgram's ``Finalize``) asked for: settled,
    but no pause ended the turn."""
    live = connection(Listening(utterance_end=True))
    flushed = segment("Hello, world.", start=500, end=2000).model_copy(update={"flushed": True})
    [results] = live.translate(SegmentMessage(sid="s_live", seq=3, type="final", segment=flushed))
    assert results.type == "Results" and results.is_final and results.from_finalize  # type: ignore[union-attr]
    assert not results.speech_final  # type: ignore[union-attr]  # no UtteranceEnd either
    wire = json.loads(results.model_dump_json(exclude_none=True))
    assert wire["from_finalize"] is True
    paused = SegmentMessage(sid="s_live", seq=4, type="final", segment=segment("Bye.", end=900))
    results, _ = live.translate(paused)
    assert results.speech_final and not results.from_finalize  # type: ignore[union-attr]


def test_audio_frames_become_chunks_of_whole_samples() -> None:
    live = connection()
    assert live.audio(b"\x01\x02\x03") == [(0, b"\x01\x02")]
    chunks = live.audio(b"\x04" + b"\x00" * 64_000)  # at most a second (32000 bytes) each
    assert [(n, len(data)) for n, data in chunks] == [(1, 32_000), (2, 32_000), (3, 2)]
    assert chunks[0][1][:2] == b"\x03\x04"  # the byte held back comes first
    assert live.chunks == 4
    metadata = live.metadata()
    assert metadata.duration == pytest.approx(64_004 / 32_000, abs=0.001)
    assert metadata.request_id == "s_live" and len(metadata.sha256) == 64


def test_a_wav_header_is_checked_and_dropped() -> None:
    def header(rate: int) -> bytes:
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(b"\x01\x00" * 4)
        return buffer.getvalue()

    assert connection().audio(header(16_000)) == [(0, b"\x01\x00" * 4)]
    with pytest.raises(LiveAudioError, match="44100 Hz"):
        connection().audio(header(44_100))


def test_control_messages() -> None:
    live = connection()
    assert live.control('{"type": "KeepAlive"}') == ("keepalive", [])
    assert live.control('{"type": "Finalize"}') == ("finalize", [])
    assert live.control('{"type": "CloseStream"}') == ("close", [])
    _, [failure] = live.control('{"type": "Configure", "keyterms": ["x"]}')
    assert failure.type == "ConfigureFailure"
    _, [error] = live.control("hello")
    assert error.type == "Error" and error.variant == "SchemaError"  # type: ignore[union-attr]


def test_pre_recorded_response() -> None:
    first = segment("Hello there. How are you?", start=0, end=3000)
    second = segment("Fine.", start=6000, end=7000).model_copy(update={"id": "b", "speaker": "S1"})
    transcript = TranscriptResponse(
        sid="s_file", status=SessionStatus.COMPLETED, text="Hello there. How are you? Fine.",
        language="en", duration_ms=7500, segments=(first, second),
    )  # fmt: skip
    listening = Listening(punctuate=True, utterances=True, paragraphs=True)
    body = file_response(transcript, listening, model="tiny.en", sha256="0" * 64)
    assert body.metadata.request_id == "s_file" and body.metadata.duration == 7.5
    [channel] = body.results.channels
    [alternative] = channel.alternatives
    assert alternative.transcript == "Hello there. How are you? Fine."
    assert [u.speaker for u in body.results.utterances or []] == [1, 0]
    paragraphs = alternative.paragraphs
    assert paragraphs is not None and len(paragraphs.paragraphs) == 2
    sentences = paragraphs.paragraphs[0].sentences
    assert [s.text for s in sentences] == ["Hello there.", "How are you?"]
    assert sentences[1].start == 1.2  # timed by its words
    assert "Speaker 1: Hello there." in paragraphs.transcript
    json.dumps(body.model_dump(mode="json"))
    bare = file_response(transcript, Listening(), model="tiny.en", sha256="0" * 64)
    assert bare.results.channels[0].alternatives[0].transcript == plain(transcript.text)
    assert bare.results.utterances is None
