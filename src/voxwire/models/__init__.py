"""Whisper models for voxwire: build, cache, find and check whisper.cpp model files.

- :mod:`.ct2` reads CTranslate2 checkpoints (the weights we ship);
- :mod:`.ggml` describes and checks the whisper.cpp ggml file format;
- :mod:`.convert` turns a CTranslate2 Whisper checkpoint into a ggml file;
- :mod:`.registry` is the local model cache used by the CLI and the workers.

Typical use::

    from voxwire.models import resolve
    path = resolve("tiny.en")        # built from the bundled checkpoint on first use
"""

from voxwire.models.registry import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ModelInfo,
    ModelSpec,
    cache_dir,
    install,
    installed,
    is_installed,
    model_path,
    resolve,
    validate,
)

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "ModelInfo",
    "ModelSpec",
    "cache_dir",
    "install",
    "installed",
    "is_installed",
    "model_path",
    "resolve",
    "validate",
]
