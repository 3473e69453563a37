"""Requests and MQTT connections without valid credentials are refused; a tenant
cannot reach another tenant's session."""

from __future__ import annotations

import time

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from tests.helpers import Listener, PlatformThread
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(120), pytest.mark.any_engine]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"X-API-Key": "vxk_00000000_forged"}]
)
def test_http_requires_a_valid_key(platform: PlatformThread, headers: dict[str, str]) -> None:
    response = httpx.get(f"{platform.url}/v1/sessions", headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert "voxwire keys create" in response.json()["hint"]


def test_mqtt_without_credentials_is_refused(platform: PlatformThread) -> None:
    anonymous = Listener(platform.mqtt_port, None, username=None, client_id="anon")
    assert anonymous.connect() not in (None, 0)
    anonymous.close()
    wrong = Listener(platform.mqtt_port, "vxk_00000000_wrong", client_id="wrong")
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
    mallory = Listener(platform.mqtt_port, other_key, client_id="mallory")
    assert mallory.connect() == 0
    # The embedded broker refuses the SUBSCRIBE (0x80); Mosquitto's dynamic security
    # grants it over MQTT 3.1.1 but never delivers: either way nothing arrives.
    granted = mallory.subscribe(session_filter(sid)) + mallory.subscribe("transcription/#")
    if isinstance(platform, PlatformThread):
        assert granted == [0x80, 0x80]
    owner = {"Authorization": f"Bearer {platform.api_key}"}
    deadline = time.monotonic() + 60
    while httpx.get(f"{platform.url}/v1/sessions/{sid}", headers=owner).json()["status"] not in (
        "completed",
        "failed",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(0.5)
    mallory.close()
    assert mallory.snapshot() == []
