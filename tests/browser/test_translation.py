"""Translation in the web app, in headless Chromium, with Whisper base: an
upload of espeak-ng Spanish with "Translate into English" ticked shows English
segments, each marked with the language it was translated from ("es → en")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext

from evaluation.speech import SENTENCES, english_share, have_espeak, speak
from tests.browser.conftest import Steps, open_app
from tests.helpers import PlatformThread
from tests.models.conftest import cache_at, fresh_cache
from voxwire.core.config import Settings
from voxwire.models import install

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed"),
]

ROWS = """rows => rows.map(r => {
  const from = r.querySelector('.translated');
  return { task: r.dataset.task ?? null, from: from ? from.textContent : null,
           text: r.querySelector('.text').textContent };
})"""


@pytest.fixture
def base_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PlatformThread]:
    """The platform serving base, fetched (joined, verified) into a fresh cache."""
    with cache_at(fresh_cache(tmp_path / "cache")) as cache:
        install("base")
    monkeypatch.setenv("VOXWIRE_CACHE_DIR", str(cache))
    settings = Settings(
        http_port=0, mqtt_port=0, ws_port=0, data_dir=tmp_path / "data", model="base"
    )
    running = PlatformThread(settings, None).start()
    yield running
    running.stop()


def test_an_upload_translated_into_english_says_from_which_language(
    context: BrowserContext, base_platform: PlatformThread, steps: Steps, tmp_path: Path
) -> None:
    spanish = next(s for s in SENTENCES if s.language == "es")
    page = open_app(context, base_platform, base_platform.api_key)
    page.set_input_files("#file", str(speak(spanish, tmp_path)))
    page.check("#upload-translate")
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=300_000)
    steps.shot(page, "translated")
    rows = page.eval_on_selector_all("#upload-view .segments li", ROWS)
    assert rows and all(r["task"] == "translate" and r["from"] == "es → en" for r in rows), rows
    text = " ".join(r["text"] for r in rows)
    assert english_share(text) >= 0.3 and {"table", "restaurant"} <= set(
        re.findall(r"[a-z]+", text.lower())
    ), text
