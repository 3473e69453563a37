"""Fixtures for engine tests: whisper.cpp engines on freshly converted models,
and faster-whisper on the shipped tiny.en."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.models.conftest import Converted
from voxwire.workers.engines import create_engine
from voxwire.workers.engines.faster_whisper import FasterWhisperEngine
from voxwire.workers.engines.whispercpp import WhisperCppEngine


@pytest.fixture(scope="session")
def model_files(converted: dict[str, Converted]) -> dict[str, Path]:
    """Every tiny.en model, converted fresh into the run's private cache."""
    return {name: item.path for name, item in converted.items()}


@pytest.fixture(scope="session", params=["tiny.en", "tiny.en-q8_0"])
def whispercpp_engine(
    request: pytest.FixtureRequest, model_files: dict[str, Path]
) -> Iterator[WhisperCppEngine]:
    """A loaded engine per model, reused by every test (as a worker does)."""
    loaded = WhisperCppEngine(model_files[request.param])
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def f16_engine(model_files: dict[str, Path]) -> Iterator[WhisperCppEngine]:
    """One engine for behaviour that does not depend on the weights' type."""
    loaded = WhisperCppEngine(model_files["tiny.en"])
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def engine() -> Iterator[FasterWhisperEngine]:
    """faster-whisper on tiny.en (the default engine), loaded once for every test
    here that needs a real one."""
    loaded = create_engine("faster-whisper", "tiny.en")
    assert isinstance(loaded, FasterWhisperEngine)
    yield loaded
    loaded.close()
