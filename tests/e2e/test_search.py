"""Search over HTTP and the SDK, in both modes: transcripts of uploaded eval files
are found by their words (also misrecognised ones, and words said across
segments), only by their own tenant."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from tests.helpers import Listener, PlatformThread
from voxwire.access.keys import key_id_of
from voxwire_client import ApiError, Client, SearchPage, SearchQuery
from voxwire_client.api import QueryResult
from voxwire_client.topics import query_request_topic, query_result_topic

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]

JFK = EVAL_DIR / "audio" / "whisper_jfk.flac"
THOUGHTS = EVAL_DIR / "audio" / "mfa_thoughts.flac"
CORPUS = EVAL_DIR / "audio" / "mfa_acoustic_corpus.wav"


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


def test_words_said_across_two_segments_are_found_through_the_windows(
    platform: PlatformThread,
) -> None:
    """The worker sends windows of committed text; the indexer indexes them;
    a phrase from the end of one segment into the next is one hit over both."""
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        transcript = client.transcribe(CORPUS)
        spoken = [s for s in transcript.segments if len(s.text.split()) >= 2]
        assert len(spoken) >= 2, transcript.segments
        before, after = spoken[0], spoken[1]
        assert after.index == before.index + 1
        phrase = f'"{before.text.split()[-1]} {after.text.split()[0]}"'
        deadline = time.monotonic() + 60
        while True:
            page = client.search(phrase, sids=[transcript.sid], size=100)
            spans = [h.segment_ids for h in page.hits]
            if (before.id, after.id) in spans or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (before.id, after.id) in spans, (phrase, page.hits)


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
    # the platform is shared: other tests' sessions say the same words, and a
    # page of hits need not reach this one without --session
    sid = transcribed[JFK.name]
    only_it = ("--session", sid)
    found = _cli("search", "query", "amercans", "--fuzzy", *only_it, "--json", env=client_env)
    assert found.returncode == 0, found.stderr
    assert sid in {h["sid"] for h in json.loads(found.stdout)["hits"]}
    wide = {**client_env, "COLUMNS": "200"}
    table = _cli("search", "query", "fellow americans", *only_it, env=wide)
    assert "fellow" in table.stdout.lower() and sid in table.stdout
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


def _ask(platform: PlatformThread, key: str, qid: str, body: bytes, *, client_id: str) -> Listener:
    """Subscribe to the answer, then publish the question, as a device would."""
    key_id = key_id_of(key)
    assert key_id is not None
    asker = Listener(platform.mqtt_port, key, client_id=client_id)
    assert asker.connect() == 0
    assert asker.subscribe(query_result_topic(key_id, qid)) == [1]
    asker.client.publish(query_request_topic(key_id, qid), body, qos=1).wait_for_publish(10)
    return asker


def _answer(asker: Listener) -> QueryResult:
    got = asker.wait_for(lambda got: got, timeout=60)
    # delivery is at least once: a query redelivered after a broker or Kafka
    # restart is answered again, with the same answer under the same qid
    answers = {QueryResult.model_validate_json(g.payload).model_dump_json() for g in got}
    assert len(answers) == 1, answers
    return QueryResult.model_validate_json(got[0].payload)


def test_search_over_mqtt_answers_only_the_asking_key(
    platform: PlatformThread, transcribed: dict[str, str]
) -> None:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        assert _until_found(client, "fellow americans").hits
    query = SearchQuery(q="amercans", fuzzy=True, sids=(transcribed[JFK.name],))
    asker = _ask(platform, platform.api_key, "q1", query.model_dump_json().encode(), client_id="a1")
    result = _answer(asker)
    assert result.qid == "q1" and result.error is None and result.page is not None
    (hit,) = result.page.hits
    assert hit.sid == transcribed[JFK.name] and "<em>Americans</em>" in hit.highlight
    asker.close()
    # a late subscriber still gets the (retained) answer
    late = Listener(platform.mqtt_port, platform.api_key, client_id="a2")
    assert late.connect() == 0
    key_id = key_id_of(platform.api_key)
    assert key_id is not None
    assert late.subscribe(query_result_topic(key_id, "q1")) == [1]
    assert _answer(late).page == result.page
    late.close()

    # another tenant's key can neither read that answer nor ask under that key
    other = platform.new_tenant_key("mqtt-query-other")
    spy = Listener(platform.mqtt_port, other, client_id="spy")
    assert spy.connect() == 0
    granted = spy.subscribe(query_result_topic(key_id, "q1")) + spy.subscribe("query/#")
    if isinstance(platform, PlatformThread):
        assert granted == [0x80, 0x80]
    spy.client.publish(query_request_topic(key_id, "q2"), query.model_dump_json(), qos=1)
    time.sleep(3)
    assert spy.snapshot() == []
    spy.close()
    # its own key's queries see only its own (empty) transcripts
    mine = _ask(platform, other, "q3", query.model_dump_json().encode(), client_id="o1")
    page = _answer(mine).page
    assert page is not None and page.hits == ()
    mine.close()


def test_a_bad_query_over_mqtt_gets_an_error_answer(platform: PlatformThread) -> None:
    for qid, body, code in (
        ("bad1", b"{not json", "invalid_request"),
        ("bad2", b'{"q": "x", "size": 0}', "invalid_request"),
        ("bad3", b'{"q": "***"}', "bad_query"),
    ):
        asker = _ask(platform, platform.api_key, qid, body, client_id=f"c-{qid}")
        result = _answer(asker)
        assert result.page is None and result.error is not None
        assert result.error.code == code, result.error
        asker.close()
