"""Search over HTTP and the SDK, in both modes: transcripts of uploaded eval files
are found by their words (also misrecognised ones), only by their own tenant."""

from __future__ import annotations

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
