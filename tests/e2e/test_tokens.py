"""Session tokens for browsers, in both modes: a token reaches only the sessions
it names, through the real broker (embedded, or Mosquitto's dynamic security)."""

from __future__ import annotations

import logging
import time
from urllib.parse import urlsplit

import httpx
import pytest

from evaluation.distributed import DistributedPlatform
from tests.helpers import Listener, PlatformThread
from voxwire_client.topics import session_filter

pytestmark = [pytest.mark.timeout(120), pytest.mark.any_engine]


def _post(
    platform: PlatformThread, path: str, body: object, key: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or platform.api_key}"}
    return httpx.post(f"{platform.url}{path}", headers=headers, json=body, timeout=30)


def _stream(platform: PlatformThread) -> str:
    response = _post(platform, "/v1/streams", {})
    assert response.status_code == 201, response.text
    return str(response.json()["sid"])


def _sids(listener: Listener) -> set[str]:
    return {r.topic.split("/")[1] for r in listener.snapshot()}


def test_a_token_reaches_only_the_sessions_it_names(platform: PlatformThread) -> None:
    mine, other = _stream(platform), _stream(platform)
    response = _post(platform, "/v1/tokens", {"sids": [mine], "ttl_s": 300})
    assert response.status_code == 201, response.text
    grant = response.json()
    assert grant["sids"] == [mine] and grant["expires_at"] > time.time() + 250
    browser = Listener(
        platform.mqtt_port, grant["token"], username=grant["username"], client_id="browser-1"
    )
    assert browser.connect() == 0
    assert browser.subscribe(session_filter(mine)) == [1]
    granted = browser.subscribe(session_filter(other)) + browser.subscribe("transcription/#")
    if isinstance(platform, PlatformThread):
        assert granted == [0x80, 0x80]
    browser.wait_for(lambda got: mine in {r.topic.split("/")[1] for r in got}, timeout=20)
    time.sleep(1.0)  # the other session's retained messages would have come by now
    assert _sids(browser) == {mine}
    browser.close()

    tampered = grant["token"][:-4] + ("AAAA" if grant["token"][-4:] != "AAAA" else "BBBB")
    forger = Listener(platform.mqtt_port, tampered, username=grant["username"], client_id="f")
    assert forger.connect() != 0


def test_a_token_is_only_for_the_callers_own_sessions(platform: PlatformThread) -> None:
    mine = _stream(platform)
    other_key = platform.new_tenant_key("token-other")
    response = _post(platform, "/v1/tokens", {"sids": [mine]}, key=other_key)
    assert response.status_code == 404
    response = httpx.post(f"{platform.url}/v1/tokens", json={"sids": [mine]}, timeout=30)
    assert response.status_code == 401
    for body in ({"sids": []}, {"sids": [mine], "ttl_s": 10**6}, {"sids": ["a/+/#"]}, {}):
        assert _post(platform, "/v1/tokens", body).status_code == 422, body


def test_a_token_reads_its_sessions_over_http_and_nothing_else(platform: PlatformThread) -> None:
    mine, other = _stream(platform), _stream(platform)
    grant = _post(platform, "/v1/tokens", {"sids": [mine], "ttl_s": 300}).json()
    assert grant["ws_url"].startswith("ws://") and grant["ws_url"].endswith("/mqtt")
    as_token = {"Authorization": f"Bearer {grant['token']}"}

    def get(path: str, headers: dict[str, str] = as_token) -> httpx.Response:
        return httpx.get(f"{platform.url}{path}", headers=headers, timeout=30)

    for route in ("", "/messages", "/transcript"):
        response = get(f"/v1/sessions/{mine}{route}")
        assert response.status_code == 200, (route, response.text)
        assert get(f"/v1/sessions/{other}{route}").status_code == 404, route
    assert response.json()["sid"] == mine
    # what needs an API key stays closed to a token
    assert get("/v1/sessions").status_code == 401
    assert _post(platform, "/v1/search", {"q": "x"}, key=grant["token"]).status_code == 401
    assert _post(platform, "/v1/streams", {}, key=grant["token"]).status_code == 401
    assert _post(platform, "/v1/tokens", {"sids": [mine]}, key=grant["token"]).status_code == 401
    tampered = grant["token"][:-4] + ("AAAA" if grant["token"][-4:] != "AAAA" else "BBBB")
    response = get(f"/v1/sessions/{mine}", {"Authorization": f"Bearer {tampered}"})
    assert response.status_code == 401 and response.json()["code"] == "bad_token"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_secrets_never_reach_the_logs(platform: PlatformThread | DistributedPlatform) -> None:
    """Keys, tokens and server passwords, used rightly and wrongly, appear in no
    log line of any voxwire process."""
    capture, root = _Capture(), logging.getLogger()
    level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)  # everything voxwire logs in this process, debug included
    try:
        sid = _stream(platform)
        grant = _post(platform, "/v1/tokens", {"sids": [sid]}).json()
        for username, password in (
            (grant["username"], grant["token"]),
            ("", platform.api_key),
            ("", platform.api_key[:-3] + "xyz"),  # a wrong key
            (grant["username"], grant["token"][:-3] + "xyz"),  # a forged token
        ):
            listener = Listener(platform.mqtt_port, password, username=username, client_id="s")
            listener.connect()
            listener.close()
        wrong = httpx.get(
            f"{platform.url}/v1/sessions", headers={"Authorization": "Bearer vxk_abc_wrong"}
        )
        assert wrong.status_code == 401
    finally:
        root.removeHandler(capture)
        root.setLevel(level)
    secrets = [platform.api_key, grant["token"], "vxk_abc_wrong"]
    text = "\n".join(capture.lines)
    if isinstance(platform, DistributedPlatform):
        env = platform.env
        secrets += [
            env["VOXWIRE_MQTT_PASSWORD"],
            str(urlsplit(env["VOXWIRE_POSTGRES_DSN"]).password),
            str(urlsplit(env["VOXWIRE_REDIS_URL"]).password),
        ]
        text += "\n".join(p.read_text(errors="replace") for p in platform.log_dir.glob("*.log"))
    assert text.strip(), "no log lines were captured: the check would prove nothing"
    for secret in secrets:
        assert secret not in text, f"a secret ({secret[:6]}...) is in the logs"
