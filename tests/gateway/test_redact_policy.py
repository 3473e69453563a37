"""Which redaction a session gets: its own choice, its tenant's, the platform's;
never less than its tenant requires."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.corpus import EVAL_DIR
from tests.gateway.gateway_app import gateway_client
from voxwire.access.keys import generate_key
from voxwire.bus import MemoryBus
from voxwire.core.config import Settings, load_settings
from voxwire.core.errors import ConfigError
from voxwire.store import SqliteStore
from voxwire.wire.records import FileJob, StreamStart, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC
from voxwire_client.api import RedactMode as M


def test_a_tenant_policy_is_a_floor_and_sessions_choose_above_it() -> None:
    settings = Settings(redact=M.OFF, redact_tenants={"bank": M.MASK})
    assert settings.security.redact_for("bank", None) is M.MASK
    assert settings.security.redact_for("bank", M.OFF) is M.MASK  # cannot be turned off
    assert settings.security.redact_for("bank", M.ENTITY) is M.ENTITY
    assert settings.security.redact_for("shop", None) is M.OFF
    assert settings.security.redact_for("shop", M.ENTITY) is M.ENTITY
    assert Settings(redact=M.ENTITY).security.redact_for("shop", None) is M.ENTITY


def test_a_numbers_floor_cannot_be_lowered_to_mask_or_entity() -> None:
    settings = Settings(redact_tenants={"clinic": M.NUMBERS, "bank": M.ENTITY})
    for asked in (None, M.OFF, M.MASK, M.ENTITY, M.NUMBERS):
        assert settings.security.redact_for("clinic", asked) is M.NUMBERS
    assert settings.security.redact_for("bank", M.NUMBERS) is M.NUMBERS  # above the floor
    assert settings.security.redact_for("bank", M.MASK) is M.MASK  # as much hidden


def test_tenant_policies_come_from_the_environment_as_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VOXWIRE_REDACT_TENANTS", json.dumps({"bank": "entity"}))
    assert load_settings(tmp_path / "none.toml").security.redact_tenants == {"bank": M.ENTITY}
    monkeypatch.setenv("VOXWIRE_REDACT_TENANTS", "bank=entity")
    with pytest.raises(ConfigError, match="redact_tenants"):
        load_settings(tmp_path / "none.toml")
    monkeypatch.setenv("VOXWIRE_REDACT_TENANTS", json.dumps({"bank": "everything"}))
    with pytest.raises(ConfigError, match="redact_tenants"):
        load_settings(tmp_path / "none.toml")


async def test_the_gateway_applies_the_tenants_policy(tmp_path: Path) -> None:
    store, bus = SqliteStore(tmp_path / "store.sqlite3"), MemoryBus()
    tenant = await store.create_tenant("bank")
    key = generate_key()
    await store.add_api_key(tenant.id, key, "bank")
    auth = {"Authorization": f"Bearer {key.plaintext}"}
    jobs, audio = bus.subscribe("transcription.jobs", "t"), bus.subscribe(AUDIO_TOPIC, "t")
    policy = {"bank": M.MASK}
    async with gateway_client(tmp_path, store, bus=bus, redact_tenants=policy) as http:
        response = await http.post("/v1/streams", json={"redact": "off"}, headers=auth)
        assert response.status_code == 201, response.text
        files = {"file": ("jfk.flac", (EVAL_DIR / "audio" / "whisper_jfk.flac").read_bytes())}
        form = {"redact": "off"}
        response = await http.post("/v1/sessions", files=files, data=form, headers=auth)
        assert response.status_code == 201, response.text
    (record,) = await audio.next_batch(10)
    start = decode_audio_record(record.value)
    assert isinstance(start, StreamStart)
    assert start.request.redact is M.MASK
    (job,) = [FileJob.model_validate_json(r.value) for r in await jobs.next_batch(10)]
    assert job.redact is M.MASK
