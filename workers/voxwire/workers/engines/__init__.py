"""Engine implementations, chosen by name.

    engine = create_engine("whispercpp", "tiny.en")      # or a path to a model file
    segments = engine.transcribe(audio, EngineOptions())

Each implementation is imported only when it is first created, so importing
this package loads no native library. Register another implementation with
:func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from voxwire.core.errors import ConfigError
from voxwire.workers.engine import Engine

EngineFactory = Callable[..., Engine]
"""``factory(model, **kwargs) -> Engine``: ``model`` is a name or a path."""

_FACTORIES: dict[str, EngineFactory] = {}


def register(name: str, factory: EngineFactory) -> None:
    """Make ``factory`` available as ``create_engine(name, ...)``."""
    _FACTORIES[name] = factory


def available() -> list[str]:
    """Names accepted by :func:`create_engine`."""
    return sorted(_FACTORIES)


def create_engine(name: str, model: str | Path, **kwargs: Any) -> Engine:
    """Load the engine called ``name`` with ``model`` (a model name or a file path).

    Raises :class:`ConfigError` for an unknown engine and
    :class:`voxwire.core.errors.ModelError` if the model cannot be found or loaded.
    """
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ConfigError(
            f"unknown engine {name!r}", hint=f"available engines: {', '.join(available())}"
        ) from None
    return factory(model, **kwargs)


def _whispercpp(model: str | Path, *, threads: int | None = None, **kwargs: Any) -> Engine:
    """``threads`` is accepted for every engine; whisper.cpp takes its threads
    per call, from :attr:`EngineOptions.threads <voxwire.workers.engine.EngineOptions.threads>`."""
    from voxwire.models import resolve
    from voxwire.workers.engines.whispercpp import WhisperCppEngine

    del threads
    return WhisperCppEngine(resolve(model), **kwargs)


register("whispercpp", _whispercpp)


def _faster_whisper(model: str | Path, **kwargs: Any) -> Engine:
    from voxwire.models.registry import resolve_ct2
    from voxwire.workers.engines.faster_whisper import FasterWhisperEngine

    return FasterWhisperEngine(resolve_ct2(model), **kwargs)


register("faster-whisper", _faster_whisper)
