"""Speakers in the web app, in headless Chromium: an upload of two espeak-ng
voices with "Label speakers" on shows each segment's label as text, in a colour
of its own per label; a prompt limited to one speaker gives that speaker's
card; search by speaker lists only that speaker's segments."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext

from evaluation.speech import have_espeak
from tests.browser.conftest import Steps, open_app
from tests.helpers import PlatformThread
from tests.workers.speech import conversation, wav_file

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed"),
]

ROWS = """rows => rows.map(r => {
  const badge = r.querySelector('.speaker');
  return { speaker: r.dataset.speaker ?? null, label: badge ? badge.textContent : null,
           colour: badge ? getComputedStyle(badge).backgroundColor : null,
           text: r.querySelector('.text').textContent };
})"""
CARDS = """cards => cards.map(c => {
  const badge = c.querySelector('.speaker');
  return [badge ? badge.textContent : null, badge ? getComputedStyle(badge).backgroundColor : null];
})"""


def test_a_diarized_upload_shows_two_labelled_speakers_in_two_colours(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps, tmp_path: Path
) -> None:
    audio, _turns = conversation([0, 1, 0, 1], tmp_path, gap_s=1.0)
    path = wav_file(audio, tmp_path / "two-voices.wav")
    page = open_app(context, web_platform, web_platform.api_key)
    page.set_input_files("#file", str(path))
    page.fill("#upload-prompts", "S2: budget")
    page.check("#upload-diarize")
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=180_000)
    steps.shot(page, "labelled")

    rows = page.eval_on_selector_all("#upload-view .segments li", ROWS)
    assert rows and all(r["speaker"] for r in rows), rows
    assert all(r["label"] == r["speaker"] for r in rows), rows  # the label is there as text
    colours: dict[str, set[str]] = {}
    for row in rows:
        colours.setdefault(row["speaker"], set()).add(row["colour"])
    assert sorted(colours) == ["S1", "S2"], rows
    assert all(len(c) == 1 for c in colours.values()), colours  # one colour per label
    assert colours["S1"] != colours["S2"], colours
    assert all(c not in ("rgba(0, 0, 0, 0)", "") for c in colours["S1"] | colours["S2"])

    # the prompt of S2 only: one card, S2's, in S2's colour
    cards = page.eval_on_selector_all("#upload-view .match-card", CARDS)
    assert cards == [["S2", *colours["S2"]]], cards
    said_by_s2 = [r["text"].lower() for r in rows if r["speaker"] == "S2"]
    assert any("budget" in text for text in said_by_s2), rows

    # search by speaker: only S2's segments, labelled
    page.click("#tabs button[data-tab=search]")
    page.fill("#query", "budget")
    page.fill("#search-speaker", "s2")
    for _ in range(30):  # the indexer follows the results stream: give it a moment
        page.click("#search-form button")
        page.wait_for_selector("#search-results li")
        if page.query_selector("#search-results li .speaker"):
            break
        page.wait_for_timeout(500)
    labels = page.eval_on_selector_all(
        "#search-results li", "items => items.map(i => i.querySelector('.speaker')?.textContent)"
    )
    assert labels and set(labels) == {"S2"}, page.inner_text("#search-results")
    steps.shot(page, "search-by-speaker")
