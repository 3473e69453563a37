"""The web app's session pickers in headless Chromium: the models the platform
serves, a language, words to expect; the transcript says which model heard it
in which language (and which version it is, once transcribed again), and a
language the model cannot speak is refused with what to do instead."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import BrowserContext

from evaluation.corpus import EVAL_DIR
from tests.browser.conftest import Steps, open_app, search_until_found
from tests.helpers import PlatformThread
from voxwire_client import Client

pytestmark = pytest.mark.timeout(300)

HOTWORDS = EVAL_DIR / "audio" / "fasterwhisper_hotwords.mp3"


def test_words_to_expect_are_written_as_given_and_the_model_is_shown(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    page = open_app(context, web_platform, web_platform.api_key)
    model = web_platform.settings.engine.model
    offered = page.eval_on_selector_all("#upload-model option", "os => os.map(o => o.value)")
    assert offered == [model]
    page.set_input_files("#file", str(HOTWORDS))
    page.fill("#upload-vocabulary", "ComfyUI")
    page.select_option("#upload-language", "en")
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=120_000)
    steps.shot(page, "vocabulary")
    said = " ".join(page.locator("#upload-view .segments li .text").all_text_contents())
    assert "ComfyUI" in said
    assert page.text_content("#upload-view .heard") == f"{model} · en"


def test_a_language_the_model_cannot_speak_is_refused_with_a_hint(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    page = open_app(context, web_platform, web_platform.api_key)
    page.set_input_files("#file", str(HOTWORDS))
    page.select_option("#upload-language", "de")
    page.click("#upload-button")
    page.wait_for_selector("#notice:not([hidden])", timeout=30_000)
    steps.shot(page, "refused")
    notice = page.text_content("#notice") or ""
    assert "English-only" in notice and "multilingual model" in notice
    assert page.get_attribute("#upload-view .session", "data-done") is None


def _upload_then_retranscribe(platform: PlatformThread) -> str:
    """The hot-words recording uploaded, then transcribed again knowing "ComfyUI"."""
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        sid = client.transcribe(HOTWORDS).sid
        client.wait_version(client.retranscribe(sid, vocabulary=["ComfyUI"]))
        return sid


def test_a_session_transcribed_again_opens_at_its_new_version(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    with ThreadPoolExecutor(1) as pool:  # the SDK beside Playwright's event loop
        sid = pool.submit(_upload_then_retranscribe, web_platform).result(timeout=240)
    page = open_app(context, web_platform, web_platform.api_key)
    page.click(search_until_found(page, "ComfyUI", sid))
    page.wait_for_selector(f"#search-view .session[data-sid={sid}] .heard:not([hidden])")
    steps.shot(page, "version")
    model = web_platform.settings.engine.model
    assert page.text_content("#search-view .heard") == f"{model} · en · version 2"
    said = " ".join(page.locator("#search-view .segments li .text").all_text_contents())
    assert "ComfyUI" in said
