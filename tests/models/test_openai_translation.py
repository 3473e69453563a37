"""OpenAI's translations and transcriptions with a multilingual model (Whisper
base), through the official ``openai`` SDK: Spanish speech (espeak-ng) comes
back in English from ``/v1/audio/translations`` (``whisper-1`` stands for the
platform's model), as a ``verbose_json`` that says the task and the language
spoken; ``/v1/audio/transcriptions`` with ``language=es`` keeps it in Spanish.
English-only models refusing to translate: tests/e2e/test_openai.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from evaluation.speech import SENTENCES, have_espeak, speak
from tests.helpers import PlatformThread
from tests.models.conftest import cache_at, fresh_cache
from tests.models.test_translation import is_english, looked_for_are_there
from voxwire.core.config import Settings
from voxwire.models import install

pytestmark = [
    pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech"),
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning"),  # the SDK: translations
]


@pytest.fixture(scope="module")
def base_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformThread]:
    """The embedded platform serving Whisper base (installed into a fresh cache)."""
    cache = fresh_cache(tmp_path_factory.mktemp("openai-base-cache"))
    with cache_at(cache):
        install("base")
        settings = Settings(
            http_port=0,
            mqtt_port=0,
            ws_port=0,
            data_dir=tmp_path_factory.mktemp("openai-base"),
            model="base",
        )
        platform = PlatformThread(settings, None).start()
        yield platform
        platform.stop()


def test_spanish_is_translated_into_english(base_platform: PlatformThread, tmp_path: Path) -> None:
    spanish = next(s for s in SENTENCES if s.language == "es")
    wav = speak(spanish, tmp_path)
    client = OpenAI(
        base_url=f"{base_platform.url}/v1", api_key=base_platform.api_key, max_retries=0
    )
    assert [m.id for m in client.models.list()] == ["base"]

    english = client.audio.translations.create(file=wav, model="whisper-1")
    verbose = client.audio.translations.create(
        file=wav, model="base", response_format="verbose_json"
    )
    srt = client.audio.translations.create(file=wav, model="whisper-1", response_format="srt")
    spoken = client.audio.transcriptions.create(file=wav, model="base", language="es")

    print(f"translated: {english.text!r}; transcribed: {spoken.text!r}")
    assert is_english(english.text) and looked_for_are_there(spanish, english.text), english.text
    assert (verbose.task, verbose.language) == ("translate", "es")  # type: ignore[attr-defined]
    assert verbose.text == english.text and verbose.segments
    assert srt.startswith("1\n00:00:")
    assert not is_english(spoken.text) and "restaurante" in spoken.text.lower(), spoken.text
