"""A real browser (Debian's headless Chromium, driven by Playwright) against the
embedded platform, with screenshots of each step kept as test artifacts.

``wss_platform`` is the same platform with its broker's WebSocket listener on
TLS (a certificate from a test CA made by trustme); the browser trusts that
certificate by its public key (``--ignore-certificate-errors-spki-list``), as
a browser trusts a real one by its CA."""

from __future__ import annotations

import base64
import hashlib
import shutil
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from evaluation.corpus import UTTERANCES, eval_items, joined_utterances
from tests.helpers import PlatformThread
from voxwire.core.config import Settings

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
SILENCE_S = 1.0


@pytest.fixture(scope="module")
def web_platform(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path
) -> Iterator[PlatformThread]:
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=tmp_path_factory.mktemp("web"),
        max_audio_s=120,
    )
    running = PlatformThread(settings, None).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 from a test CA, and its key (PEM files)."""
    leaf = trustme.CA().issue_cert("127.0.0.1", "localhost")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key


@pytest.fixture(scope="module")
def wss_platform(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path, tls_files: tuple[Path, Path]
) -> Iterator[PlatformThread]:
    cert, key = tls_files
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        ws_tls_cert=cert,
        ws_tls_key=key,
        data_dir=tmp_path_factory.mktemp("web-wss"),
        max_audio_s=120,
    )
    running = PlatformThread(settings, None).start()
    yield running
    running.stop()


def _spki_sha256(cert: Path) -> str:
    """The base64 SHA-256 of a certificate's public key, as Chromium pins it."""
    public = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def microphone_speech_s() -> float:
    """How long the fake microphone takes to say every utterance (with the
    silence before them and a second after each)."""
    return SILENCE_S + sum(item.duration_s + 1 for item in eval_items() if item.id in UTTERANCES)


@pytest.fixture(scope="module")
def microphone_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """What the fake microphone says: the streaming utterances, with silence
    around them (16 kHz mono WAV), and their references."""
    pcm, _spans, refs = joined_utterances()
    silence = np.zeros(int(16000 * SILENCE_S), dtype="<i2").tobytes()
    path = tmp_path_factory.mktemp("mic") / "microphone.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(silence + pcm + silence * 4)
    return path, refs


@pytest.fixture(scope="module")
def driver() -> Iterator[Playwright]:
    """Playwright itself: its browsers and its device profiles (``driver.devices``)."""
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="module")
def browser(
    driver: Playwright, microphone_file: tuple[Path, list[str]], tls_files: tuple[Path, Path]
) -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no chromium: install it with `scripts/services.sh browser`")
    path, _refs = microphone_file
    launched = driver.chromium.launch(
        executable_path=chromium,
        headless=True,
        args=[
            "--use-fake-ui-for-media-stream",  # grant the microphone without asking
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={path}%noloop",
            "--autoplay-policy=no-user-gesture-required",
            f"--ignore-certificate-errors-spki-list={_spki_sha256(tls_files[0])}",
        ],
    )
    yield launched
    launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    opened = browser.new_context(viewport={"width": 1100, "height": 900})
    yield opened
    opened.close()


class Steps:
    """Screenshots named after the test and the step, in artifacts/browser/."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob(f"{name}-*.png"):
            old.unlink()

    def shot(self, page: Page, step: str) -> None:
        self.count += 1
        page.screenshot(path=ARTIFACTS / f"{self.name}-{self.count:02d}-{step}.png", full_page=True)


@pytest.fixture
def steps(request: pytest.FixtureRequest) -> Steps:
    return Steps(request.node.name)


def open_app(context: BrowserContext, platform: PlatformThread, api_key: str) -> Page:
    """The web app, signed in with ``api_key``; browser console errors fail loudly."""
    page = context.new_page()
    page.on("pageerror", lambda error: print(f"page error: {error}"))
    page.on("console", lambda msg: print(f"console {msg.type}: {msg.text}"))
    page.goto(f"{platform.url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.fill("#api-key", api_key)
    page.click("#signin button")
    page.wait_for_selector("#tabs:not([hidden])")
    return page


def search_until_found(page: Page, query: str, sid: str) -> str:
    """Search the Search tab for ``query`` until session ``sid`` is among the hits
    (the indexer follows the results stream: it may take a moment); the hit's selector."""
    page.click("#tabs button[data-tab=search]")
    page.fill("#query", query)
    hit = f"#search-results li[data-sid={sid}]"
    for _ in range(30):
        page.click("#search-form button")
        page.wait_for_selector("#search-results li, #search-results:empty", state="attached")
        if page.query_selector(hit):
            break
        page.wait_for_timeout(500)
    return hit
