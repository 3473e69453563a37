"""Requests and MQTT connections without valid credentials are refused; a tenant
cannot reach another tenant's session."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import EVAL_DIR, Listener, PlatformThread
from voxwire_client.topics import session_filter

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"X-API-Key": "vxk_00000000_forged"}]
)
def test_http_requires_a_valid_key(platform: PlatformThread, headers: dict[str, str]) -> None:
    response = httpx.get(f"{platform.url}/v1/sessions", headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert "voxwire keys create" in response.json()["hint"]


def test_mqtt_without_credentials_is_refused(platform: PlatformThread) -> None:
    anonymous = Listener(platform.settings.mqtt_port, None, username=None, client_id="anon")
    assert anonymous.connect() not in (None, 0)
    anonymous.close()
    wrong = Listener(platform.settings.mqtt_port, "vxk_00000000_wrong", client_id="wrong")
    assert wrong.connect() not in (None, 0)
    wrong.close()


def test_other_tenant_cannot_follow_a_session(platform: PlatformThread) -> None:
    with (EVAL_DIR / "audio" / "lhotse_lj_LJ002-0020.wav").open("rb") as fh:
        response = httpx.post(
            f"{platform.url}/v1/sessions",
            headers={"Authorization": f"Bearer {platform.api_key}"},
            files={"file": ("a.wav", fh)},
            timeout=60,
        )
    sid = response.json()["sid"]
    other_key = platform.new_tenant_key("mallory")
    assert (
        httpx.get(
            f"{platform.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {other_key}"}
        ).status_code
        == 404
    )
    mallory = Listener(platform.settings.mqtt_port, other_key, client_id="mallory")
    assert mallory.connect() == 0
    assert mallory.subscribe(session_filter(sid)) == [0x80]
    assert mallory.subscribe("transcription/#") == [0x80]
    mallory.close()
    assert mallory.snapshot() == []
