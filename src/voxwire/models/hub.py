"""Fetch Whisper weights from the Hugging Face Hub: pinned, verified, offline-capable.

Every file is fetched with ``huggingface_hub`` (its ``hf_hub_download``) at the
commit the catalog pins, into the Hub's own cache (``HF_HUB_CACHE``, else
``HF_HOME/hub``, else ``~/.cache/huggingface/hub``): shared with every other tool
on the machine, and what offline mode reads. Then it is checked and linked into
voxwire's cache (a hard link; a copy across file systems), so clearing the Hub's
cache leaves voxwire's models whole::

    online    the commit's metadata (the Hub API, with blobs) -> each file's size and,
              for LFS files, sha256, for the others its git blob id; a pinned value
              the Hub contradicts is refused before anything is downloaded
    download  hf_hub_download(repo, file, revision=<commit>) -> a file of the Hub cache
    check     size, then sha256 (pinned, else the Hub's) or the git blob id
    offline   HF_HUB_OFFLINE=1: no request at all; files come from the Hub cache
              and are checked against the pinned sizes and sha256

``HF_ENDPOINT`` (a mirror or a private Hub) and ``HF_TOKEN`` are read when a
model is fetched, as is ``HF_HUB_OFFLINE``; :class:`HubAccess` carries them and a
caller may override the token (``voxwire models install --token``).

Errors are translated here into :class:`~voxwire.core.errors.ModelError`: an
unreachable Hub, a repository that needs a token, a missing commit or file, and a
file that fails its check (the hint names the cached file to delete). Each one
that stops an install names the manual route: download the files and
``voxwire models add PATH --name NAME``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import httpx2
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from voxwire.core.errors import ModelError
from voxwire.models.catalog import Checkpoint, HubSource
from voxwire.models.packages import STAMP, StageProgress, build_folder

DEFAULT_ENDPOINT = "https://huggingface.co"
_CHUNK = 1 << 20
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True, slots=True)
class HubAccess:
    """Where the Hub is and how to talk to it (see :meth:`from_env`)."""

    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = None
    """None: huggingface_hub's own (``HF_TOKEN``, else a stored login)."""
    offline: bool = False
    cache_dir: Path | None = None
    """The Hub cache; None: huggingface_hub's default."""

    @classmethod
    def from_env(cls, *, token: str | None = None, offline: bool | None = None) -> HubAccess:
        """``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_OFFLINE`` and ``HF_HUB_CACHE``/``HF_HOME``
        as they are now; ``token`` and ``offline`` override them."""
        env = os.environ
        cache = env.get("HF_HUB_CACHE") or (
            str(Path(env["HF_HOME"]) / "hub") if env.get("HF_HOME") else None
        )
        return cls(
            endpoint=(env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            token=token or env.get("HF_TOKEN") or None,
            offline=env.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE
            if offline is None
            else offline,
            cache_dir=Path(cache).expanduser() if cache else None,
        )

    def url(self, source: HubSource, name: str) -> str:
        return f"{self.endpoint}/{source.repo}/resolve/{source.revision}/{name}"


@dataclass(frozen=True, slots=True)
class _Expected:
    """What a file must be: size, and sha256 (LFS) or git blob id (others), when known."""

    size: int | None
    sha256: str | None
    blob_id: str | None = None


class _Bytes:
    """The progress bar huggingface_hub drives (its ``tqdm_class``), reporting bytes."""

    on_bytes: Callable[[int], None] = staticmethod(lambda n: None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def __enter__(self) -> _Bytes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def update(self, n: float | None = 1) -> None:
        self.on_bytes(int(n or 0))

    def close(self) -> None:
        return None


def _bar_class(on_bytes: Callable[[int], None]) -> type[_Bytes]:
    return type("_HubBytes", (_Bytes,), {"on_bytes": staticmethod(on_bytes)})


def manual_route(source: HubSource, access: HubAccess, name: str) -> str:
    """The hint that says how to install ``name`` by hand (checked against the pins)."""
    if len(source.files) == 1:
        url = access.url(source, source.files[0].name)
        return f"download {url} and run `voxwire models add FILE --name {name}`"
    files = ", ".join(f.name for f in source.files)
    tree = f"{access.endpoint}/{source.repo}/tree/{source.revision}"
    return (
        f"download {files} from {tree} into a folder and run "
        f"`voxwire models add FOLDER --name {name}`"
    )


def check_pinned(path: Path, source: HubSource, filename: str) -> None:
    """Refuse ``path`` unless it is ``filename`` of ``source`` as pinned (size, sha256):
    for files a user fetched by hand."""
    for file in source.files:
        if file.name == filename:
            verify(path, _Expected(file.size, file.sha256), filename, source)


class HubUnavailableError(ModelError):
    """The Hub cannot serve a source now (unreachable, refused, missing): another
    source may; a file that fails its check is a plain :class:`ModelError`."""


def _translate(exc: Exception, source: HubSource, access: HubAccess, name: str) -> ModelError:
    """An error of huggingface_hub as a :class:`ModelError` that says what to do next."""
    manual = manual_route(source, access, name)
    where = f"{source.repo} at {source.revision}"
    if isinstance(exc, hf_errors.GatedRepoError | hf_errors.RepositoryNotFoundError):
        return HubUnavailableError(
            f"the Hub at {access.endpoint} refused {source.repo} (not found, private or gated)",
            hint="set HF_TOKEN or pass --token with a token that may read it; or " + manual,
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubUnavailableError(f"the Hub at {access.endpoint} has no {where}", hint=manual)
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError):
        return HubUnavailableError(f"a file of {where} is missing on the Hub ({exc})", hint=manual)
    if access.offline:
        cache = access.cache_dir or "the Hugging Face cache"
        return HubUnavailableError(
            f"offline (HF_HUB_OFFLINE): {where} is not in the local Hub cache ({cache})",
            hint="fetch it once with the Hub reachable, or " + manual,
        )
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "no"
        return HubUnavailableError(
            f"the Hub at {access.endpoint} answered {status} for {where}", hint=manual
        )
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return HubUnavailableError(
        f"cannot reach the Hugging Face Hub at {access.endpoint} ({reason})",
        hint="check the network, proxy and HF_ENDPOINT; or " + manual,
    )


_HUB_ERRORS = (
    httpx2.HTTPError,  # the transport of huggingface_hub: every HTTP and network error
    hf_errors.LocalEntryNotFoundError,
    hf_errors.OfflineModeIsEnabled,
)


def _expected(source: HubSource, access: HubAccess, name: str) -> dict[str, _Expected]:
    """Each file's size and checksum: pinned, and (online) as the Hub reports them."""
    pinned = {f.name: _Expected(f.size, f.sha256) for f in source.files}
    if access.offline:
        return pinned
    api = HfApi(endpoint=access.endpoint, token=access.token)
    try:
        info = api.model_info(source.repo, revision=source.revision, files_metadata=True)
    except _HUB_ERRORS as exc:
        raise _translate(exc, source, access, name) from exc
    if info.sha != source.revision:
        raise ModelError(
            f"the Hub at {access.endpoint} answered commit {info.sha} for {source.label}",
            hint="HF_ENDPOINT must be a Hugging Face Hub (or a faithful mirror); or "
            + manual_route(source, access, name),
        )
    siblings = {s.rfilename: s for s in info.siblings or []}
    expected: dict[str, _Expected] = {}
    for file in source.files:
        sibling = siblings.get(file.name)
        if sibling is None:
            raise HubUnavailableError(
                f"{file.name} is not in {source.label} on {access.endpoint}",
                hint=manual_route(source, access, name),
            )
        lfs = sibling.lfs
        size = lfs.size if lfs is not None else sibling.size
        sha256 = lfs.sha256 if lfs is not None else None
        if (file.size is not None and size is not None and size != file.size) or (
            file.sha256 is not None and sha256 is not None and sha256 != file.sha256
        ):
            raise ModelError(
                f"the Hub at {access.endpoint} describes {file.name} of {source.label} as "
                f"{size} bytes, sha256 {sha256}; voxwire pins {file.size} bytes, "
                f"sha256 {file.sha256}: it is not the pinned file, nothing was downloaded",
                hint="check HF_ENDPOINT (a mirror must serve the same files); or "
                + manual_route(source, access, name),
            )
        expected[file.name] = _Expected(
            file.size if file.size is not None else size,
            file.sha256 or sha256,
            None if lfs is not None else sibling.blob_id,
        )
    return expected


def _download(
    source: HubSource, filename: str, access: HubAccess, name: str, on_bytes: Callable[[int], None]
) -> Path:
    """``filename`` of ``source`` in the Hub cache (downloaded unless it is there)."""
    try:
        path = hf_hub_download(
            source.repo,
            filename,
            revision=source.revision,
            endpoint=access.endpoint,
            token=access.token,
            cache_dir=access.cache_dir,
            local_files_only=access.offline,
            tqdm_class=cast(Any, _bar_class(on_bytes)),
        )
    except _HUB_ERRORS as exc:
        raise _translate(exc, source, access, name) from exc
    return Path(path)


def _digest(path: Path, want: _Expected) -> tuple[str, str] | None:
    """``(kind, hex)`` of ``path`` for the checksum ``want`` has, or None if it has none."""
    if want.sha256 is not None:
        hasher, kind, expected = hashlib.sha256(), "sha256", want.sha256
    elif want.blob_id is not None:  # git's id of a blob: sha1 of "blob <size>\0" + content
        hasher, kind, expected = hashlib.sha1(usedforsecurity=False), "git blob id", want.blob_id
        hasher.update(f"blob {path.stat().st_size}\0".encode())
    else:
        return None
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            hasher.update(chunk)
    found = hasher.hexdigest()
    return None if found == expected else (kind, found)


def verify(path: Path, want: _Expected, filename: str, source: HubSource) -> None:
    """Refuse ``path`` unless its size and checksum are ``want``'s."""
    size = path.stat().st_size
    wrong: tuple[str, str] | None = None
    if want.size is not None and size != want.size:
        wrong = ("size", f"{size} bytes, expected {want.size}")
    elif (found := _digest(path, want)) is not None:
        expected = want.sha256 if found[0] == "sha256" else want.blob_id
        wrong = (found[0], f"{found[1][:16]}..., expected {str(expected)[:16]}...")
    if wrong is not None:
        raise ModelError(
            f"{filename} from {source.label} does not match its {wrong[0]} ({wrong[1]}): "
            "the download is damaged or not the pinned file; nothing was installed",
            hint=f"delete {path.resolve()} (and {path} if it is a link) from the Hub cache "
            "and install again",
        )


def _place(path: Path, target: Path) -> None:
    """``path`` (a file of the Hub cache) at ``target``: hard-linked, else copied."""
    source = path.resolve()
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


class _Progress:
    """Bytes of one source, as ``progress(stage, fraction)``."""

    def __init__(self, progress: StageProgress | None, total: int) -> None:
        self.progress, self.total, self.done, self.stage = progress, max(total, 1), 0, ""

    def start(self, stage: str) -> None:
        self.stage = stage
        if self.progress is not None:
            self.progress(stage, min(self.done / self.total, 1.0))

    def add(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.stage, min(self.done / self.total, 1.0))


def _fill_checkpoint(
    source: HubSource, access: HubAccess, name: str, progress: StageProgress | None, folder: Path
) -> None:
    expected = _expected(source, access, name)
    follow = _Progress(progress, sum(e.size or 0 for e in expected.values()))
    for filename, want in expected.items():
        follow.start(f"downloading {source.repo} {filename}")
        path = _download(source, filename, access, name, follow.add)
        follow.start(f"verifying {filename}")
        verify(path, want, filename, source)
        _place(path, folder / Path(filename).name)
    weights = expected.get("model.bin", _Expected(None, None))
    stamp = {
        "source": f"hub:{source.repo}",
        "revision": source.revision,
        "sha256": weights.sha256,
        "size": (folder / "model.bin").stat().st_size,
    }
    (folder / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    if progress is not None:
        progress("verified", 1.0)


def fetch_checkpoint(
    checkpoint: Checkpoint, target: Path, access: HubAccess, progress: StageProgress | None = None
) -> Path:
    """Download and check ``checkpoint`` from its Hub repositories into ``target``.

    Repositories are tried in order: one the Hub cannot serve gives way to the
    next; a file that fails its check stops with that error.
    """
    failures: list[ModelError] = []
    for source in checkpoint.hub:
        fill = partial(_fill_checkpoint, source, access, checkpoint.name, progress)
        try:
            return build_folder(target, fill)
        except HubUnavailableError as exc:
            failures.append(exc)
    if not failures:
        raise ModelError(f"{checkpoint.name} is on no Hub repository")
    raise ModelError(
        f"cannot install {checkpoint.name}: " + "; ".join(e.message for e in failures),
        hint=failures[-1].hint,
    )


def fetch_file(
    source: HubSource,
    target: Path,
    access: HubAccess,
    name: str,
    progress: StageProgress | None = None,
) -> Path:
    """Download and check the one file of ``source`` (a ggml file) to ``target``,
    which appears atomically."""
    ((filename, want),) = _expected(source, access, name).items()
    follow = _Progress(progress, want.size or 0)
    follow.start(f"downloading {source.repo} {filename}")
    path = _download(source, filename, access, name, follow.add)
    follow.start(f"verifying {filename}")
    verify(path, want, filename, source)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.part")
    part.unlink(missing_ok=True)
    _place(path, part)
    os.replace(part, target)
    return target
