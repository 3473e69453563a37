"""What an upload may ask of the decoder's vocabulary: words as a list or
separated by commas reach the job; too many, too long or empty ones are a 400
that says what to send."""

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

FILES = {"file": ("jfk.flac", (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes())}


async def _post(tmp_path: Path, forms: list[dict[str, str]]) -> tuple[list[dict], list[FileJob]]:
    """Each form posted with the same file: (the answers, the jobs of those accepted)."""
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    tenant = await store.create_tenant("t")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "t")
    jobs = bus.subscribe(JOBS_TOPIC, "t")
    auth = {"Authorization": f"Bearer {key.plaintext}"}
    answers = []
    async with gateway_client(tmp_path, store, bus=bus) as http:
        for form in forms:
            response = await http.post("/v1/sessions", files=FILES, data=form, headers=auth)
            answers.append({**response.json(), "http": response.status_code})
    accepted = sum(1 for a in answers if a["http"] == 201)
    return answers, [
        FileJob.model_validate_json((await jobs.next()).value) for _ in range(accepted)
    ]


async def test_a_vocabulary_as_a_list_or_with_commas_reaches_the_job(tmp_path: Path) -> None:
    forms = [
        {"vocabulary": '["ComfyUI", "Kubernetes"]'},
        {"vocabulary": " ComfyUI ,Kubernetes, "},
        {},
    ]
    answers, jobs = await _post(tmp_path, forms)
    assert [a["http"] for a in answers] == [201, 201, 201], answers
    assert [job.vocabulary for job in jobs] == [("ComfyUI", "Kubernetes")] * 2 + [()]


@pytest.mark.parametrize(
    ("vocabulary", "says"),
    [
        (",".join(f"w{i}" for i in range(51)), "at most 50"),
        ("x" * 65, "at most 64 characters"),
        ('["ComfyUI", " "]', "[1]"),
        ('["ComfyUI", 3]', "valid string"),
        ('["ComfyUI"', "invalid vocabulary"),
    ],
)
async def test_a_bad_vocabulary_is_refused_with_what_to_send(
    tmp_path: Path, vocabulary: str, says: str
) -> None:
    answers, jobs = await _post(tmp_path, [{"vocabulary": vocabulary}])
    assert answers[0]["http"] == 400 and answers[0]["code"] == "invalid_request", answers
    assert says in answers[0]["message"] and "ComfyUI" in answers[0]["hint"]
    assert not jobs
