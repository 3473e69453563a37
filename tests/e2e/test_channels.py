"""Separate channels end to end: a mu-law 8 kHz stereo call (agent on one
channel, customer on the other, turns that alternate and overlap) uploaded with
``channels: separate`` and labels comes back with every final on the right
channel, labelled, in time order; an attenuated echo of one party on the other
channel produces no doubled text; exports and prompts use the labels."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from evaluation.corpus import corpus_wer, normalize
from evaluation.stereo_calls import StereoCall, mulaw_stereo_wav, two_party_call
from tests.helpers import PlatformThread
from voxwire_client import Client
from voxwire_client.messages import MatchMessage, Message, SegmentData, TranscriptMessage
from voxwire_client.options import PromptSpec, SessionOptions

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]

LABELS = ("agent", "customer")
CALL_WER = 0.15
"""The most word error a channel of the call may have (tiny.en on 8 kHz mu-law;
measured 0.00-0.05 per channel, see docs/channels.md)."""


def owner(text: str, refs: tuple[tuple[str, ...], ...]) -> int:
    """The channel (0, 1) whose references hold most of ``text``'s words."""
    words = normalize(text).split()
    shares = []
    for channel_refs in refs:
        vocabulary = set(normalize(" ".join(channel_refs)).split())
        shares.append(sum(w in vocabulary for w in words) / max(1, len(words)))
    return max(range(len(shares)), key=shares.__getitem__)


def upload_call(
    platform: PlatformThread, tmp_path: Path, call: StereoCall, **options: object
) -> tuple[TranscriptMessage, list[Message]]:
    path = tmp_path / "call.wav"
    path.write_bytes(mulaw_stereo_wav(call))
    asked = SessionOptions.model_validate(
        {"channels": "separate", "channel_labels": LABELS, **options}
    )
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        created = client.upload(path, options=asked)
        seen: list[Message] = []
        for message in client.events(created.sid):
            seen.append(message)
            if isinstance(message, TranscriptMessage):
                return message, seen
    raise AssertionError("the session ended without a transcript")


def by_channel(segments: tuple[SegmentData, ...]) -> list[list[str]]:
    return [[s.text for s in segments if s.channel == n] for n in (1, 2)]


def test_a_stereo_call_uploaded_with_separate_channels_is_attributed_per_channel(
    platform: PlatformThread, tmp_path: Path
) -> None:
    call = two_party_call()
    prompt = PromptSpec(id="sorrow", text="great sorrow", speaker="customer")
    transcript, seen = upload_call(platform, tmp_path, call, prompts=[prompt])
    segments = transcript.segments
    assert segments, "no finals"
    assert [s.start_ms for s in segments] == sorted(s.start_ms for s in segments)
    wrong = [s for s in segments if owner(s.text, call.refs) != (s.channel or 0) - 1]
    assert not wrong, f"finals on the wrong channel: {wrong}"  # attribution error 0
    for segment in segments:
        assert segment.speaker == LABELS[(segment.channel or 0) - 1]
    heard = by_channel(segments)
    for channel in (0, 1):
        wer = corpus_wer([" ".join(call.refs[channel])], [" ".join(heard[channel])])
        print(f"channel {channel + 1} ({LABELS[channel]}): WER {wer:.3f}: {heard[channel]}")
        assert wer <= CALL_WER
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        vtt = client.transcript_as(transcript.sid, "vtt")
        for _ in range(120):  # distributed: the indexer catches up
            found = client.search("sorrow", speaker="customer")
            if any(hit.sid == transcript.sid for hit in found.hits):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the customer's words were never found by speaker")
        not_found = client.search("sorrow", speaker="agent")
    assert "<v agent>" in vtt and "<v customer>" in vtt
    matches = [m for m in seen if isinstance(m, MatchMessage)]
    assert [m.prompt_id for m in matches] == ["sorrow"]
    assert not any(hit.sid == transcript.sid for hit in not_found.hits)


def test_an_echo_of_the_agent_on_the_customer_channel_is_not_doubled(
    platform: PlatformThread, tmp_path: Path
) -> None:
    call = two_party_call(echo_gain=0.12)  # about -18 dB, 120 ms late
    transcript, _ = upload_call(platform, tmp_path, call)
    heard = by_channel(transcript.segments)
    print(f"with echo: {heard}")
    assert all(owner(text, call.refs) == 1 for text in heard[1]), heard[1]
    agent_words = len(normalize(" ".join(call.refs[0])).split())
    said = normalize(" ".join(heard[0] + heard[1])).split()
    expected = agent_words + len(normalize(" ".join(call.refs[1])).split())
    assert len(said) <= expected + 3, f"{len(said)} words for {expected} said"


def test_labels_for_another_number_of_channels_are_refused_with_the_reason(
    platform: PlatformThread, tmp_path: Path
) -> None:
    path = tmp_path / "call.wav"
    path.write_bytes(mulaw_stereo_wav(two_party_call()))
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    data = {"channels": "separate", "channel_labels": "agent,customer,supervisor"}
    with path.open("rb") as fh:
        response = httpx.post(
            f"{platform.url}/v1/sessions",
            headers=headers,
            files={"file": ("call.wav", fh)},
            data=data,
            timeout=60,
        )
    assert response.status_code in (400, 415, 422), response.text
    assert "channel" in response.json()["message"]
    data = {"channel_labels": "agent,customer"}
    with path.open("rb") as fh:
        response = httpx.post(
            f"{platform.url}/v1/sessions",
            headers=headers,
            files={"file": ("call.wav", fh)},
            data=data,
            timeout=60,
        )
    assert response.status_code in (400, 422), response.text
    assert "separate" in response.json()["message"]


def test_a_separate_channels_upload_transcribed_again_keeps_its_channels_and_labels(
    platform: PlatformThread, tmp_path: Path
) -> None:
    call = two_party_call()
    first, _ = upload_call(platform, tmp_path, call)
    url = f"{platform.url}/v1/sessions/{first.sid}/retranscribe"
    three = {"channels": "separate", "channel_labels": ["agent", "customer", "supervisor"]}
    refused = httpx.post(url, json=three, headers={"Authorization": f"Bearer {platform.api_key}"})
    assert refused.status_code == 400, refused.text
    assert "channel_labels" in refused.json()["message"]
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        accepted = client.retranscribe(first.sid)
        messages = client.wait_version(accepted)
    again = next(m for m in messages if isinstance(m, TranscriptMessage))
    assert again.version == 2 and again.segments
    for segment in again.segments:  # labelled as the first version was, from its channel
        assert segment.channel in (1, 2), segment
        assert segment.speaker == LABELS[segment.channel - 1]
        assert owner(segment.text, call.refs) == segment.channel - 1, segment
    assert by_channel(again.segments) == by_channel(first.segments)
