"""The speaker encoder's weights: from Resemblyzer's wheel to a numpy file.

Resemblyzer (PyPI ``resemblyzer``, Apache-2.0, by Resemble AI) ships the
weights of its GE2E speaker encoder (Wan et al., "Generalized end-to-end loss
for speaker verification", 2018) inside its wheel as ``pretrained.pt``: a
3-layer LSTM (40 mel channels in, 256 hidden) and a 256 x 256 linear layer,
trained on LibriSpeech, VoxCeleb 1 and 2. No torch is needed to use them: on
first use the wheel is downloaded into ``<cache>/packages`` (pip, like the
Whisper checkpoints: :mod:`voxwire.models.packages`), ``pretrained.pt`` is
checked against its pinned sha256, its tensors are read without torch
(:mod:`voxwire.models.torch_legacy`) and the network's are written to
``<cache>/models/speaker-ge2e.npz``. The encoder itself
(:mod:`voxwire.workers.speakers.encoder`) runs them in numpy.

Nothing of this happens unless a session asks for diarization (or ``voxwire
models install speaker-ge2e``): ``make run`` does not download the 15.7 MB wheel.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxwire.core.errors import ModelError
from voxwire.models.catalog import SplitSource, WheelFile
from voxwire.models.packages import StageProgress, download, read_member
from voxwire.models.registry import models_dir, packages_dir
from voxwire.models.torch_legacy import load_tensors

SPEAKER_MODEL = "speaker-ge2e"
"""The speaker encoder's name in the cache and the CLI."""
LICENCE = "Apache-2.0"

WEIGHTS = WheelFile("resemblyzer==0.1.4", "resemblyzer/pretrained.pt")
WEIGHTS_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
WEIGHTS_SIZE = 17_090_379

LAYERS = 3
"""LSTM layers; each has ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""
_PREFIX = "model_state."
_FORMAT = 1  # of the .npz; bump when what it holds changes

Weights = dict[str, npt.NDArray[np.float32]]


def weights_path() -> Path:
    return models_dir() / f"{SPEAKER_MODEL}.npz"


def _names() -> list[str]:
    lstm = [
        f"lstm.{kind}_l{layer}"
        for layer in range(LAYERS)
        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]
    return [*lstm, "linear.weight", "linear.bias"]


def convert(pretrained: bytes) -> Weights:
    """The encoder's tensors from the bytes of ``pretrained.pt`` (checked first)."""
    digest = hashlib.sha256(pretrained).hexdigest()
    if len(pretrained) != WEIGHTS_SIZE or digest != WEIGHTS_SHA256:
        raise ModelError(
            f"{WEIGHTS.member} from {WEIGHTS.package} does not match its pinned checksum "
            f"({len(pretrained)} bytes, sha256 {digest[:16]}...)",
            hint=f"delete the resemblyzer wheel from {packages_dir()} and try again",
        )
    tensors = load_tensors(pretrained)
    try:
        return {name: tensors[_PREFIX + name].astype(np.float32) for name in _names()}
    except KeyError as exc:
        raise ModelError(f"{WEIGHTS.member} has no tensor {exc}") from None


def _check(weights: dict[str, Any]) -> Weights:
    if int(weights.get("format", -1)) != _FORMAT or any(n not in weights for n in _names()):
        raise ModelError("the speaker encoder file is from another version")
    return {name: np.asarray(weights[name], dtype=np.float32) for name in _names()}


def is_installed() -> bool:
    try:
        load()
    except ModelError:
        return False
    return True


def install(*, force: bool = False, progress: StageProgress | None = None) -> Path:
    """Download, verify and convert the weights into the cache (a no-op when there)."""
    path = weights_path()
    if not force and is_installed():
        return path
    source = SplitSource(
        f"{WEIGHTS.name} {WEIGHTS.version}",
        parts=(WEIGHTS,),
        files=(),
        sha256=WEIGHTS_SHA256,
        size=WEIGHTS_SIZE,
    )
    download(packages_dir(), source, progress)
    if progress is not None:
        progress(f"converting {SPEAKER_MODEL}", 0.5)
    weights = convert(read_member(packages_dir(), WEIGHTS))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(out, format=np.int64(_FORMAT), **weights)  # type: ignore[arg-type]
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if progress is not None:
        progress("installed", 1.0)
    return path


def load() -> Weights:
    """The encoder's weights from the cache; ModelError when not installed."""
    path = weights_path()
    try:
        with np.load(path) as data:
            return _check(dict(data))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"the speaker encoder is not installed ({path})",
            hint=f"voxwire models install {SPEAKER_MODEL}",
        ) from exc


def load_or_install(progress: StageProgress | None = None) -> Weights:
    """The weights, installed first when the cache lacks them."""
    if not is_installed():
        install(progress=progress)
    return load()
