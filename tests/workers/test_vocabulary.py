"""A session's vocabulary reaches the decoder in both engines: the recording
that says "ComfyUI" (../shared/eval) comes out as "comfy eye" from tiny.en
without it, and as "ComfyUI" with it, as a file and as a live final."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evaluation.corpus import EVAL_DIR
from voxwire.audio.decoding import decode
from voxwire.workers.engine import Engine, EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.engines.whispercpp import WhisperCppEngine

pytestmark = pytest.mark.timeout(300)

HOTWORDS = EVAL_DIR / "audio" / "fasterwhisper_hotwords.mp3"


@pytest.fixture(scope="module", params=["whispercpp", "faster-whisper"])
def engine(request: pytest.FixtureRequest, f16_engine: WhisperCppEngine) -> Iterator[Engine]:
    if request.param == "whispercpp":
        yield f16_engine
        return
    loaded = create_engine("faster-whisper", "tiny.en")
    yield loaded
    loaded.close()


def test_the_words_of_a_vocabulary_are_written_as_given(engine: Engine) -> None:
    audio = decode(HOTWORDS.read_bytes()).samples
    plain = " ".join(s.text for s in engine.transcribe(audio, EngineOptions(threads=2)))
    hinted_options = EngineOptions(threads=2, vocabulary=("ComfyUI",))
    hinted = " ".join(s.text for s in engine.transcribe(audio, hinted_options))
    print(f"without: {plain!r}\nwith:    {hinted!r}")
    assert "ComfyUI" not in plain
    assert "ComfyUI" in hinted and "folder" in hinted


def test_the_vocabulary_opens_the_prompt_before_the_stream_context() -> None:
    options = EngineOptions(vocabulary=("ComfyUI", "Kubernetes"), initial_prompt="Earlier text")
    assert options.prompt == "ComfyUI, Kubernetes. Earlier text"
    assert EngineOptions().prompt is None
    assert EngineOptions(initial_prompt="Earlier text").prompt == "Earlier text"
