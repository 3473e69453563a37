"""Search over HTTP and the SDK, in both modes: transcripts of uploaded eval files
are found by their words (also misrecognised ones), only by their own tenant."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import httpx
import pytest

from tests.helpers import EVAL_DIR, PlatformThread
from voxwire_client import ApiError, Client, SearchPage

pytestmark = pytest.mark.timeout(300)

JFK = EVAL_DIR / "audio" / "whisper_jfk.flac"
THOUGHTS = EVAL_DIR / "audio" / "mfa_thoughts.flac"


def _until_found(client: Client, q: str, **filters: object) -> SearchPage:
    """Indexing runs beside delivery (a consumer group of its own): wait for it."""
    deadline = time.monotonic() + 60
    while True:
        page = client.search(q, **filters)
        if page.hits or time.monotonic() > deadline:
            return page
        time.sleep(0.5)


@pytest.fixture(scope="module")
def transcribed(platform: PlatformThread) -> dict[str, str]:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        return {path.name: client.transcribe(path).sid for path in (JFK, THOUGHTS)}


def test_a_transcript_is_found_by_its_words(
    platform: PlatformThread, transcribed: dict[str, str]
) -> None:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        page = _until_found(client, "fellow Americans", sids=[transcribed[JFK.name]])
        (hit,) = page.hits
        assert hit.sid == transcribed[JFK.name] and not page.more
        assert "<em>fellow</em> <em>Americans</em>" in hit.highlight
        assert 0 <= hit.start_ms < hit.end_ms <= 11_100
        # a misrecognised word, and a number said in words
        (fuzzy,) = _until_found(client, "amercans", fuzzy=True, sids=[hit.sid]).hits
        assert fuzzy.segment_id == hit.segment_id
        assert not client.search("amercans", sids=[hit.sid]).hits
        (thousand,) = _until_found(client, "1000 thoughts", sids=[transcribed[THOUGHTS.name]]).hits
        assert "<em>a thousand</em>" in thousand.highlight.lower()
        # a window of the audio where the words were not said
        assert not client.search("fellow americans", sids=[hit.sid], start_ms=hit.end_ms).hits


def test_another_tenant_finds_nothing(
    platform: PlatformThread, transcribed: dict[str, str]
) -> None:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as owner:
        assert _until_found(owner, "fellow americans").hits
    other = platform.new_tenant_key("search-other")
    with Client(platform.url, other, platform.mqtt_url) as client:
        assert client.search("fellow americans").hits == ()
        assert client.search("fellow americans", sids=list(transcribed.values())).hits == ()


def test_bad_queries_get_a_clear_error(platform: PlatformThread) -> None:
    url = f"{platform.url}/v1/search"
    auth = {"Authorization": f"Bearer {platform.api_key}"}
    response = httpx.post(url, headers=auth, json={"q": "*** ///"})
    assert response.status_code == 400
    assert response.json()["code"] == "bad_query"
    assert "no words" in response.json()["message"]
    for body in ({"q": "x" * 501}, {"q": "budget", "size": 0}, {"q": "a", "sids": ["../x"]}):
        assert httpx.post(url, headers=auth, json=body).status_code == 422
    assert httpx.post(url, headers=auth, content=b"{not json").status_code == 422
    assert httpx.post(url, json={"q": "budget"}).status_code == 401
    with (
        Client(platform.url, platform.api_key, platform.mqtt_url) as client,
        pytest.raises(ApiError, match="no words"),
    ):
        client.search('"" ***')


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxwire.cli", *args],
        capture_output=True, text=True, timeout=150, env={**os.environ, **env}, check=False,
    )  # fmt: skip


def test_the_cli_searches_and_reindexes_while_the_platform_runs(
    platform: PlatformThread, transcribed: dict[str, str]
) -> None:
    client_env = {"VOXWIRE_URL": platform.url, "VOXWIRE_API_KEY": platform.api_key}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        assert _until_found(client, "fellow americans").hits
    found = _cli("search", "query", "amercans", "--fuzzy", "--json", env=client_env)
    assert found.returncode == 0, found.stderr
    assert transcribed[JFK.name] in {h["sid"] for h in json.loads(found.stdout)["hits"]}
    table = _cli("search", "query", "fellow americans", env={**client_env, "COLUMNS": "200"})
    assert "fellow" in table.stdout.lower() and transcribed[JFK.name] in table.stdout
    bad = _cli("search", "query", "***", env=client_env)
    assert bad.returncode == 1 and "no words" in bad.stderr

    if isinstance(platform, PlatformThread):
        server_env = {"VOXWIRE_DATA_DIR": str(platform.settings.data_dir)}
        args: tuple[str, ...] = ("search", "reindex")
    else:
        server_env = {k: v for k, v in platform.env.items() if k.startswith("VOXWIRE_")}
        args = ("search", "reindex", "--distributed")
    rebuilt = _cli(*args, env=server_env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert re.search(r"indexed \d+ segments of \d+ sessions", rebuilt.stdout), rebuilt.stdout
    # the running gateway searches the rebuilt index
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        (hit,) = _until_found(client, "fellow americans", sids=[transcribed[JFK.name]]).hits
        assert hit.sid == transcribed[JFK.name]
