"""What an upload may ask of diarization: bad speaker bounds are a 400 that
says what to send; good ones reach the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.corpus import EVAL_DIR
from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.bus import MemoryBus
from voxwire.store import SqliteStore
from voxwire.wire.records import FileJob
from voxwire.wire.topics import JOBS_TOPIC
from voxwire_client.api import SpeakerBounds

BAD = [
    ({"diarize": "true", "min_speakers": "3", "max_speakers": "2"}, "more than max_speakers"),
    ({"diarize": "true", "min_speakers": "0"}, "speaker bounds"),
    ({"diarize": "true", "max_speakers": "21"}, "speaker bounds"),
    ({"diarize": "true", "max_speakers": "two"}, "invalid max_speakers"),
    ({"diarize": "maybe"}, "invalid diarize"),
    ({"max_speakers": "2"}, "need diarize"),
]


@pytest.mark.parametrize(("form", "says"), BAD)
async def test_bad_speaker_bounds_are_refused(
    tmp_path: Path, form: dict[str, str], says: str
) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    tenant = await store.create_tenant("t")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "t")
    files = {"file": ("jfk.flac", (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes())}
    async with gateway_client(tmp_path, store, bus=bus) as http:
        response = await http.post(
            "/v1/sessions",
            files=files,
            data=form,
            headers={"Authorization": f"Bearer {key.plaintext}"},
        )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_request"
    assert says in body["message"]
    assert body["hint"]


async def test_good_bounds_reach_the_job(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    tenant = await store.create_tenant("t")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "t")
    jobs = bus.subscribe(JOBS_TOPIC, "t")
    files = {"file": ("jfk.flac", (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes())}
    auth = {"Authorization": f"Bearer {key.plaintext}"}
    async with gateway_client(tmp_path, store, bus=bus) as http:
        on = {"diarize": "true", "min_speakers": "1", "max_speakers": "3"}
        assert (await http.post("/v1/sessions", files=files, data=on, headers=auth)).is_success
        assert (await http.post("/v1/sessions", files=files, headers=auth)).is_success
    first = FileJob.model_validate_json((await jobs.next()).value)
    assert first.diarize == SpeakerBounds(min_speakers=1, max_speakers=3)
    assert FileJob.model_validate_json((await jobs.next()).value).diarize is None
