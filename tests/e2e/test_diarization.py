"""Diarization end to end: an upload with ``diarize`` on, through the real
platform, comes back with every final labelled by the voice that said it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import PlatformThread
from tests.multilingual import have_espeak
from tests.workers.speech import conversation
from voxwire.core.audio import SAMPLE_RATE
from voxwire_client import Client
from voxwire_client.api import SpeakerBounds
from voxwire_client.messages import SegmentMessage, is_terminal

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed"),
]


def _wav(audio: np.ndarray, path: Path) -> Path:
    import wave

    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def test_an_upload_with_diarization_labels_every_final_by_its_voice(
    platform: PlatformThread, tmp_path: Path
) -> None:
    voices = [0, 1, 0, 1]
    audio, turns = conversation(voices, tmp_path, gap_s=1.0)
    path = _wav(audio, tmp_path / "two-voices.wav")
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        created = client.upload(path, diarize=SpeakerBounds(max_speakers=4))
        finals = []
        for message in client.events(created.sid):
            if isinstance(message, SegmentMessage) and message.type == "final":
                finals.append(message.segment)
            if is_terminal(message):
                break
        stored = client.transcript(created.sid)
        plain = client.transcribe(path)
    assert finals and all(s.speaker in ("S1", "S2") for s in finals)
    for turn in turns:  # the finals inside each turn carry its voice's label
        inside = [s for s in finals if turn.start_ms <= (s.start_ms + s.end_ms) // 2 < turn.end_ms]
        assert inside, f"no final for the turn at {turn.start_ms} ms"
        expected = f"S{voices.index(turn.voice) + 1}"
        assert {s.speaker for s in inside} == {expected}, (turn, inside)
    assert [s.speaker for s in stored.segments] == [s.speaker for s in finals]
    assert all(s.speaker is None for s in plain.segments)  # off unless asked
