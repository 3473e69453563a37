"""The web app on a phone: Playwright's phone profiles (viewport, device scale
factor, touch, mobile user agent) on Chromium, every control tapped.

The layout fits each screen without sideways scrolling, with thumb-sized
controls and a readable transcript. A live stream from the (fake) microphone
gives its finals; the same stream with the network gone for a few seconds in
the middle loses nothing: the browser SDK drops its socket when the browser
reports the network gone, keeps the audio recorded meanwhile, sends it in order
on reconnect, and every message reaches the page once, in ``seq`` order.

Chromium's offline emulation blocks new connections and fires ``offline`` and
``online``, but leaves an open WebSocket alone (a real network change kills
it); the SDK's own ``offline`` handling is what cuts it here."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from evaluation.corpus import UTTERANCES, corpus_wer, word_errors
from tests.browser.conftest import Steps, microphone_speech_s
from tests.helpers import CAPTURE_WORDS_MARGIN, PlatformThread

pytestmark = pytest.mark.timeout(420)

TOUCH_PX = 44  # the smallest touch target Apple's and Google's guidelines allow
OUTAGE_S = 5


def phone(browser: Browser, driver: Playwright, device: str) -> BrowserContext:
    """A browser context with the device's profile (its browser type aside: Chromium)."""
    profile = {k: v for k, v in driver.devices[device].items() if k != "default_browser_type"}
    assert profile["is_mobile"] and profile["has_touch"]
    return browser.new_context(**profile)


def sign_in(context: BrowserContext, platform: PlatformThread, steps: Steps) -> Page:
    page = context.new_page()
    page.on("pageerror", lambda error: print(f"page error: {error}"))
    page.goto(f"{platform.url}/")
    page.wait_for_selector("body[data-ready=true]")
    assert_fits(page, ["#signin button", "#api-key"])
    steps.shot(page, "sign-in")
    page.tap("#api-key")
    page.keyboard.type(platform.api_key)
    page.tap("#signin button")
    page.wait_for_selector("#tabs:not([hidden])")
    return page


# In the page: how wide the document is against the screen, which of the given
# controls are smaller than a fingertip or stick out, and the text sizes.
MEASURE = """(selectors) => {
  const width = window.innerWidth;
  const out = { overflow: document.documentElement.scrollWidth - width, small: [], outside: [],
                wide: [], fields: [] };
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    const name = el.id || el.className || el.tagName;
    if (r.width && (r.left < -1 || r.right > width + 1)) out.wide.push(name);
  }
  for (const selector of selectors) {
    for (const el of document.querySelectorAll(selector)) {
      const r = el.getBoundingClientRect();
      if (!r.width) continue;  // not shown
      if (Math.round(r.height) < TOUCH || Math.round(r.width) < TOUCH) {
        out.small.push(`${selector} ${Math.round(r.width)}x${Math.round(r.height)}`);
      }
    }
  }
  const typed = 'input:not([type=checkbox]):not([type=file]), textarea';
  for (const el of document.querySelectorAll(typed)) {
    if (el.getBoundingClientRect().width) {
      out.fields.push(parseFloat(getComputedStyle(el).fontSize));
    }
  }
  return out;
}""".replace("TOUCH", str(TOUCH_PX))


def assert_fits(page: Page, controls: list[str]) -> None:
    """No sideways scrolling, every control at least a fingertip, and text
    fields at 16 px (iOS zooms into smaller ones when they get the focus)."""
    seen = page.evaluate(MEASURE, controls)
    assert seen["overflow"] <= 0 and not seen["wide"], seen
    assert not seen["small"], seen["small"]
    assert all(size >= 16 for size in seen["fields"]), seen["fields"]


@pytest.mark.parametrize("device", ["Pixel 7", "iPhone 13", "iPhone SE"])
def test_every_tab_fits_a_phone_screen_with_thumb_sized_controls(
    browser: Browser, driver: Playwright, web_platform: PlatformThread, steps: Steps, device: str
) -> None:
    context = phone(browser, driver, device)
    try:
        page = sign_in(context, web_platform, steps)
        tabs = ["#tabs button", "#signout"]
        assert_fits(page, [*tabs, "#upload-button", "#upload-redact", "#file"])
        steps.shot(page, "upload")
        page.tap("#tabs button[data-tab=live]")
        page.wait_for_selector("#tab-live:not([hidden])")
        assert_fits(page, [*tabs, "#record", "#apply-prompts"])
        steps.shot(page, "live")
        page.tap("#tabs button[data-tab=search]")
        page.wait_for_selector("#tab-search:not([hidden])")
        assert_fits(page, [*tabs, "#search-form button", "#query", "#search-speaker"])
        steps.shot(page, "search")
        page.tap("#signout")
        page.wait_for_selector("#signin:not([hidden])")
    finally:
        context.close()


@dataclass
class Stream:
    """What the page showed of one live stream, and what a second subscriber on the phone got."""

    rows: list[dict[str, Any]]
    finals: list[str]
    seqs: list[int]
    followed_finals: list[int]
    reconnect_status: str | None


# In the page: a second subscriber (the SDK) to the live session, recording the
# seq of every message it releases and the index of every final.
FOLLOW = """async (sid) => {
  const { VoxwireClient } = await import('/app/sdk/index.js');
  const client = new VoxwireClient({ apiKey: sessionStorage.getItem('voxwire.apiKey') });
  const seen = window.followed = { seqs: [], finals: [] };
  const feed = await client.follow(sid, { listeners: {
    message: (m) => seen.seqs.push(m.seq),
    final: (m) => seen.finals.push(m.segment.index),
  } });
  window.followedEnd = feed.done.then((transcript) => transcript.status);
}"""


def stream_on(
    context: BrowserContext, platform: PlatformThread, steps: Steps, outage_s: int
) -> Stream:
    """Record the fake microphone's file to its end, tapping Record and Stop;
    with ``outage_s``, the network goes away that long after the first final."""
    page = sign_in(context, platform, steps)
    page.tap("#tabs button[data-tab=live]")
    page.tap("#record")
    page.wait_for_selector("#record[data-recording=true]", timeout=30_000)
    page.wait_for_selector("#live-view .session[data-sid]")
    page.evaluate(FOLLOW, page.get_attribute("#live-view .session", "data-sid"))
    page.wait_for_selector("#live-view .segments li[data-final=true]", timeout=60_000)
    reconnect_status = None
    if outage_s:
        context.set_offline(True)
        page.wait_for_selector("#live-view .session[data-connection=reconnecting]", timeout=10_000)
        reconnect_status = page.inner_text("#live-view .status")
        steps.shot(page, "offline")
        page.wait_for_timeout(outage_s * 1000)
        context.set_offline(False)
        page.wait_for_selector("#live-view .session[data-connection=live]", timeout=30_000)
    speech_s = microphone_speech_s()
    with contextlib.suppress(PlaywrightTimeout):  # fewer finals than utterances: WER tells
        page.wait_for_function(
            "n => document.querySelectorAll('#live-view li[data-final=true]').length >= n",
            arg=len(UTTERANCES),
            timeout=int((speech_s + 30) * 1000),
        )
    page.wait_for_timeout(1000)
    page.tap("#record")
    page.wait_for_selector("#live-view .session[data-done=completed]", timeout=60_000)
    assert page.evaluate("() => window.followedEnd") == "completed"
    assert_fits(page, ["#record", "#tabs button"])
    steps.shot(page, "stopped")
    rows = page.eval_on_selector_all(
        "#live-view .segments li",
        """rows => rows.map(r => ({index: Number(r.dataset.index), seq: Number(r.dataset.seq),
             end_ms: Number(r.dataset.endMs), final: r.dataset.final === 'true',
             text: r.querySelector('.text').textContent,
             size: parseFloat(getComputedStyle(r.querySelector('.text')).fontSize),
             fits: r.scrollWidth <= r.clientWidth}))""",
    )
    followed = page.evaluate("() => window.followed")
    return Stream(
        rows=rows,
        finals=[r["text"] for r in rows if r["final"]],
        seqs=followed["seqs"],
        followed_finals=followed["finals"],
        reconnect_status=reconnect_status,
    )


def assert_whole_and_in_order(stream: Stream) -> None:
    """Every message once, in seq order with no gap, and every final on screen
    in order: what the subscriber got is what the page shows."""
    assert stream.seqs == list(range(1, len(stream.seqs) + 1)), stream.seqs
    rows = stream.rows
    assert rows and all(r["final"] for r in rows), rows
    assert [r["index"] for r in rows] == list(range(len(rows))), rows
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(set(seqs)), seqs
    assert stream.followed_finals == [r["index"] for r in rows]
    assert all(r["fits"] and r["size"] >= 15 for r in rows), rows  # readable, no sideways scroll


def test_live_on_a_phone_loses_nothing_while_the_network_is_gone(
    browser: Browser,
    driver: Playwright,
    web_platform: PlatformThread,
    microphone_file: tuple[Path, list[str]],
    steps: Steps,
) -> None:
    """The same recording streamed twice from a phone: straight through, then
    with the network gone for a few seconds after the first final."""
    _path, refs = microphone_file
    runs: dict[str, Stream] = {}
    for name, outage_s in (("steady", 0), ("outage", OUTAGE_S)):
        context = phone(browser, driver, "Pixel 7")
        try:
            runs[name] = stream_on(context, web_platform, steps, outage_s)
        finally:
            context.close()
    steady, outage = runs["steady"], runs["outage"]
    for run in (steady, outage):
        assert_whole_and_in_order(run)
    assert outage.reconnect_status and "still recording" in outage.reconnect_status

    wer = {name: corpus_wer([" ".join(refs)], [" ".join(run.finals)]) for name, run in runs.items()}
    print(
        f"phone stream WER {wer['steady']:.4f} straight through, {wer['outage']:.4f} "
        f"with {OUTAGE_S} s offline ({len(steady.finals)} and {len(outage.finals)} finals)"
    )
    errors = {
        name: word_errors([" ".join(refs)], [" ".join(run.finals)]) for name, run in runs.items()
    }
    margin = CAPTURE_WORDS_MARGIN
    assert errors["outage"] <= errors["steady"] + margin, (outage.finals, steady.finals)
    # stream time counts the audio received: a lost stretch would end the last final early
    assert abs(outage.rows[-1]["end_ms"] - steady.rows[-1]["end_ms"]) <= 1500, (
        outage.rows[-1],
        steady.rows[-1],
    )
