"""A session's vocabulary, end to end in every mode: the recording that says
"ComfyUI" (../shared/eval), uploaded and streamed with "ComfyUI" in its
vocabulary, is transcribed with the word as given; without it, it is not."""

from __future__ import annotations

import numpy as np

from evaluation.corpus import EVAL_DIR, pcm16
from tests.helpers import PlatformThread
from voxwire.audio.decoding import decode
from voxwire_client import Client, StreamRequest, pcm_chunks

HOTWORDS = EVAL_DIR / "audio" / "fasterwhisper_hotwords.mp3"


def test_an_upload_and_a_stream_write_their_vocabulary_as_given(platform: PlatformThread) -> None:
    samples = decode(HOTWORDS.read_bytes()).samples
    pcm = pcm16(np.concatenate([samples, np.zeros(16_000, dtype=np.float32)]))
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        hinted = client.transcribe(HOTWORDS, vocabulary=["ComfyUI"])
        plain = client.transcribe(HOTWORDS)
        live = client.stream(pcm_chunks(pcm), StreamRequest(vocabulary=("ComfyUI",)), speed=4)
    print(f"upload: {hinted.text!r} (without: {plain.text!r}); stream: {live.text!r}")
    assert "ComfyUI" in hinted.text and "folder" in hinted.text
    assert "ComfyUI" not in plain.text
    assert "ComfyUI" in live.text
