"""The media-stream protocol of a telephony platform, message by message."""

from __future__ import annotations

import base64
import json

import pytest

from voxwire.gateway.media_stream import (
    Audio,
    EndStream,
    MediaStreamCall,
    MediaStreamError,
    OpenStream,
)
from voxwire_client import AudioEncoding

CALL = "CA" + "0123456789abcdef" * 2


def start(
    encoding: str = "audio/x-mulaw",
    rate: int = 8000,
    tracks: tuple[str, ...] = ("inbound",),
    parameters: dict[str, str] | None = None,
) -> str:
    return json.dumps(
        {
            "event": "start",
            "sequenceNumber": "1",
            "start": {
                "accountSid": "AC1",
                "callSid": CALL,
                "streamSid": "MZ1",
                "tracks": list(tracks),
                "customParameters": parameters or {"agent": "7"},
                "mediaFormat": {"encoding": encoding, "sampleRate": rate, "channels": 1},
            },
            "streamSid": "MZ1",
        }
    )


def media(payload: bytes, track: str = "inbound", chunk: int = 1, at_ms: int = 20) -> str:
    body = {"track": track, "chunk": str(chunk), "timestamp": str(at_ms), "payload": ""}
    body["payload"] = base64.b64encode(payload).decode()
    return json.dumps({"event": "media", "streamSid": "MZ1", "media": body})


def test_a_call_becomes_a_mulaw_stream_named_after_the_call() -> None:
    call = MediaStreamCall(track="inbound")  # the caller alone, though both are sent
    assert call.receive(json.dumps({"event": "connected", "protocol": "Call"})) == []
    (opened,) = call.receive(start(tracks=("inbound", "outbound")))
    assert isinstance(opened, OpenStream) and opened.sid == f"call-{CALL}"
    assert opened.request.encoding is AudioEncoding.MULAW and opened.request.rate == 8000
    assert call.receive(media(b"\xff" * 160)) == [Audio(0, b"\xff" * 160)]
    assert call.receive(media(b"\x7f" * 160, track="outbound")) == []  # the agent's side
    assert call.receive(json.dumps({"event": "mark", "mark": {"name": "x"}})) == []
    assert call.receive(media(b"\x00" * 160, chunk=2)) == [Audio(1, b"\x00" * 160)]
    assert call.receive(json.dumps({"event": "stop", "stop": {"callSid": CALL}})) == [EndStream()]
    assert call.receive(media(b"\x00")) == [] and call.end() == []


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        (["not json"], "not a media stream message"),
        ([json.dumps({"event": "hello"})], "not a media stream message"),
        ([media(b"\x00")], "media before start"),
        ([start("audio/x-alaw")], "is not audio/x-mulaw at 8000 Hz"),
        ([start(rate=16000)], "at 16000 Hz"),
        ([start(), json.dumps({"event": "media", "media": {"payload": "%%%"}})], "not base64"),
        ([start(), start()], "a second start"),
    ],
)
def test_what_the_protocol_has_not_is_refused_with_the_reason(
    messages: list[str], says: str
) -> None:
    call = MediaStreamCall()
    *before, last = messages
    for message in before:
        call.receive(message)
    with pytest.raises(MediaStreamError, match=says):
        call.receive(last)


def test_a_call_that_drops_before_start_ends_nothing() -> None:
    assert MediaStreamCall().end() == []


def test_the_key_in_the_custom_parameters_comes_with_the_opening() -> None:
    message = json.loads(start())
    message["start"]["customParameters"] = {"key": "vx_secret"}
    (opened,) = MediaStreamCall().receive(json.dumps(message))
    assert isinstance(opened, OpenStream) and opened.key == "vx_secret"
    assert "vx_secret" not in repr(opened)


def test_a_call_with_both_tracks_becomes_a_stream_with_the_parties_apart() -> None:
    call = MediaStreamCall()
    (opened,) = call.receive(start(tracks=("inbound", "outbound")))
    assert isinstance(opened, OpenStream)
    assert opened.request.channels == "separate"
    assert opened.request.channel_labels == ("customer", "agent")
    assert call.receive(media(b"\x01" * 160, "inbound", 1, 0)) == []  # waits for the other
    (both,) = call.receive(media(b"\x02" * 160, "outbound", 1, 0))
    assert isinstance(both, Audio) and both == Audio(0, b"\x01\x02" * 160)
    assert call.receive(media(b"\x03" * 160, "inbound", 2, 20)) == []
    ended = call.receive(json.dumps({"event": "stop", "stop": {"callSid": CALL}}))
    assert ended == [Audio(1, b"\x03\xff" * 160), EndStream()]  # the rest, the agent silent


def test_the_tracks_labels_may_come_as_custom_parameters() -> None:
    labels = {"inbound_label": "caller", "outbound_label": "bot"}
    (opened,) = MediaStreamCall().receive(start(tracks=("inbound", "outbound"), parameters=labels))
    assert isinstance(opened, OpenStream) and opened.request.channel_labels == ("caller", "bot")
    with pytest.raises(MediaStreamError, match="inbound_label"):
        MediaStreamCall().receive(
            start(tracks=("inbound", "outbound"), parameters={"inbound_label": "no spaces"})
        )


def test_a_dropped_call_hands_over_its_audio_and_a_reconnection_numbers_on() -> None:
    call = MediaStreamCall()
    call.receive(start(tracks=("inbound", "outbound")))
    call.receive(media(b"\x01" * 160, "inbound", 1, 0))
    assert call.detach() == [Audio(0, b"\x01\xff" * 160)]  # no EndStream: it may go on
    assert call.ended and call.end() == []
    again = MediaStreamCall()
    again.receive(start(tracks=("inbound", "outbound")))
    again.go_on_from(1)
    again.receive(media(b"\x05" * 160, "inbound", 1, 0))
    assert again.receive(media(b"\x06" * 160, "outbound", 1, 0)) == [Audio(1, b"\x05\x06" * 160)]
