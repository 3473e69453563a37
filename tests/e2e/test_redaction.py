"""A card number said aloud and uploaded with entity redaction: the engine writes
"4111 1111 1111 1112" spoken by espeak-ng as ``4,111,111,111,111,111,111,111,111``
(too many digits, no valid check digit), and faster-whisper puts it in a segment
of its own after "Please charge it to my card." It is delivered, stored and
indexed masked, in every mode."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from evaluation.speech import have_espeak
from tests.helpers import PlatformThread
from voxwire_client import Client, SearchPage

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech"),
]

SAID = "Please charge it to my card, 4111 1111 1111 1112. Thank you."


def _until_found(client: Client, q: str, sid: str) -> SearchPage:
    """Indexing runs beside delivery (a consumer group of its own): wait for it."""
    deadline = time.monotonic() + 60
    while True:
        page = client.search(q, sids=[sid])
        if page.hits or time.monotonic() > deadline:
            return page
        time.sleep(0.5)


def test_a_spoken_card_number_is_delivered_stored_and_indexed_masked(
    platform: PlatformThread, tmp_path: Path
) -> None:
    wav = tmp_path / "card.wav"
    subprocess.run(
        ["espeak-ng", "-v", "en-us", "-s", "175", "-w", str(wav), SAID],
        check=True,
        capture_output=True,
    )
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        delivered = client.transcribe(wav, redact="entity")
        stored = client.transcript(delivered.sid)
        indexed = _until_found(client, "charge", delivered.sid)
        by_number = client.search("4111", sids=[delivered.sid])
    texts = [
        delivered.text,
        *(s.text for s in delivered.segments),
        stored.text,
        *(s.text for s in stored.segments),
        *(h.text for h in indexed.hits),
    ]
    assert indexed.hits and "card" in delivered.text.lower(), texts
    assert "[CREDIT_CARD]" in delivered.text and "[CREDIT_CARD]" in stored.text, texts
    assert not any(re.search(r"\d", text) for text in texts), texts
    assert not by_number.hits
