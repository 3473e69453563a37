"""``opus-lace``: libopus 1.5.2 with its speech enhancement, built from its sources.

Live Opus streams decode best with libopus's own decoder and LACE, the neural
network it runs on SILK speech (:mod:`voxwire.audio.libopus`). Neither PyAV's
FFmpeg nor this platform's Debian (libopus 1.3.1) has it, and no wheel ships
it, so ``voxwire models install opus-lace`` builds it:

- the release sources, weights of LACE included, come from Debian's archive
  (``opus_1.5.2.orig.tar.gz``, the upstream release tarball, 7.8 MB), checked
  against the pinned size and sha256 and kept in ``<cache>/packages``;
- ``./configure --enable-osce`` and ``make`` build them (a C compiler and make
  are needed; under a minute on two cores);
- ``<cache>/codecs/opus-lace/libopus.so`` is the result, with a stamp saying what
  was built; the folder appears whole or not at all.

``$VOXWIRE_OPUS_LIBRARY``, when set, names the library to use instead (the
container image sets it to the build it carries, as Kubernetes mounts another
cache). Nothing else depends on it: a worker without it decodes Opus with
FFmpeg's decoder (:func:`library` is None) and says how to install it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from voxwire.audio.libopus import OpusLibrary
from voxwire.core.errors import ModelError
from voxwire.models.packages import STAMP, StageProgress, build_folder
from voxwire.models.registry import cache_dir, packages_dir

__all__ = [
    "LIBRARY",
    "OPUS_MODEL",
    "SOURCE_URL",
    "VERSION",
    "folder",
    "install",
    "is_installed",
    "library",
]

OPUS_MODEL = "opus-lace"
VERSION = "1.5.2"
SOURCE_URL = f"https://deb.debian.org/debian/pool/main/o/opus/opus_{VERSION}.orig.tar.gz"
SHA256 = "65c1d2f78b9f2fb20082c38cbe47c951ad5839345876e46941612ee87f9a7ce1"
SIZE = 7_839_412
CONFIGURE = ("--enable-osce", "--disable-doc", "--disable-extra-programs", "--disable-static")
LIBRARY = "libopus.so"
LIBRARY_ENV = "VOXWIRE_OPUS_LIBRARY"
_CHUNK = 1 << 16


def folder() -> Path:
    return cache_dir() / "codecs" / OPUS_MODEL


def is_installed() -> bool:
    """Whether the built library is in the cache, stamped as this version's build."""
    try:
        stamp = json.loads((folder() / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(stamp, dict)
        and stamp.get("sha256") == SHA256
        and list(stamp.get("configure", ())) == list(CONFIGURE)
        and (folder() / LIBRARY).is_file()
    )


def library() -> OpusLibrary | None:
    """The library of ``$VOXWIRE_OPUS_LIBRARY``, else the installed one, loaded;
    None when neither is there. Raises :class:`ModelError` when it does not load."""
    named = os.environ.get(LIBRARY_ENV)
    if named:
        return OpusLibrary(Path(named))
    return OpusLibrary(folder() / LIBRARY) if is_installed() else None


def install(*, force: bool = False, progress: StageProgress | None = None) -> Path:
    """Download, check and build libopus with LACE into the cache (a no-op when there)."""
    if not force and is_installed():
        return folder() / LIBRARY
    missing = [tool for tool in ("cc", "make") if shutil.which(tool) is None]
    if missing:
        raise ModelError(
            f"building {OPUS_MODEL} needs a C compiler and make "
            f"({' and '.join(missing)} not found)",
            hint="install them (Debian: apt-get install gcc make), then "
            f"voxwire models install {OPUS_MODEL}",
        )
    sources = _download(progress)
    built = build_folder(folder(), lambda out: _build(sources, out, progress))
    OpusLibrary(built / LIBRARY)  # it loads, or the error says so now
    if progress is not None:
        progress("installed", 1.0)
    return built / LIBRARY


def _download(progress: StageProgress | None) -> Path:
    """The release tarball in ``<cache>/packages``, downloaded once and checked."""
    target = packages_dir() / SOURCE_URL.rsplit("/", 1)[1]
    if target.is_file() and _digest(target) == (SIZE, SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(SOURCE_URL, timeout=60) as got:
            done = 0
            while chunk := got.read(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(f"downloading libopus {VERSION}", min(done / SIZE, 1.0) * 0.3)
    except (OSError, http.client.HTTPException) as exc:  # refused, cut short, timed out
        Path(tmp).unlink(missing_ok=True)
        raise ModelError(
            f"cannot download libopus {VERSION}'s sources from {SOURCE_URL}: {exc}",
            hint=f"check access to deb.debian.org, or copy that file into {target.parent}",
        ) from exc
    size, digest = _digest(Path(tmp))
    if (size, digest) != (SIZE, SHA256):
        Path(tmp).unlink(missing_ok=True)
        raise ModelError(
            f"libopus {VERSION}'s sources do not match their pinned checksum "
            f"({size} bytes, sha256 {digest[:16]}...; expected {SIZE} bytes, {SHA256[:16]}...)",
            hint=f"check what serves {SOURCE_URL} here (a proxy?), then install again",
        )
    os.chmod(tmp, 0o644)  # mkstemp creates 0600
    os.replace(tmp, target)
    return target


def _build(sources: Path, out: Path, progress: StageProgress | None) -> None:
    """Configure and make ``sources``; the shared library and a stamp into ``out``."""
    with tempfile.TemporaryDirectory(prefix="voxwire-libopus-") as work:
        if progress is not None:
            progress(f"unpacking libopus {VERSION}", 0.3)
        _unpack(sources, Path(work))
        tree = Path(work) / f"opus-{VERSION}"
        if progress is not None:
            progress(f"configuring libopus {VERSION}", 0.35)
        _run(["./configure", "--quiet", *CONFIGURE], tree)
        if progress is not None:
            progress(f"compiling libopus {VERSION} with LACE", 0.45)
        _run(["make", f"-j{os.cpu_count() or 1}"], tree)
        built = (tree / ".libs" / LIBRARY).resolve()
        shutil.copyfile(built, out / LIBRARY)
    (out / LIBRARY).chmod(0o755)
    stamp = {"version": VERSION, "source": SOURCE_URL, "sha256": SHA256, "configure": CONFIGURE}
    (out / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")


def _unpack(sources: Path, into: Path) -> None:
    """Extract ``sources`` into ``into``: plain files and folders inside it only
    (Python 3.11.2, Debian's, has no extraction filters)."""
    with tarfile.open(sources) as archive:
        members = archive.getmembers()
        for member in members:
            inside = (into / member.name).resolve().is_relative_to(into.resolve())
            if not inside or not (member.isfile() or member.isdir()):
                raise ModelError(
                    f"{sources.name} holds {member.name!r}, not a plain file inside it",
                    hint=f"delete {sources} and install {OPUS_MODEL} again",
                )
        archive.extractall(into, members=members)  # noqa: S202 (every member checked above)


def _run(command: list[str], where: Path) -> None:
    done = subprocess.run(command, cwd=where, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ModelError(
            f"building libopus {VERSION} failed at `{' '.join(command)}`: "
            f"{said[-1] if said else f'exit status {done.returncode}'}",
            hint=f"check the C compiler (gcc, make), then voxwire models install {OPUS_MODEL}",
        )


def _digest(path: Path) -> tuple[int, str]:
    hasher = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            hasher.update(chunk)
            size += len(chunk)
    return size, hasher.hexdigest()
