"""Blob storage for uploaded audio: local files in embedded mode.

Keys are built by voxwire from the session id and fixed names, never from
user input, so no upload name can escape the root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from voxwire.errors import NotFoundError
from voxwire_client.topics import validate_sid

_NAME = re.compile(r"[a-z0-9_.]{1,32}")


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def key(self, sid: str, name: str) -> str:
        if not _NAME.fullmatch(name) or ".." in name:
            raise ValueError(f"invalid blob name {name!r}")
        return f"{validate_sid(sid)}/{name}"

    def _path(self, key: str) -> Path:
        sid, _, name = key.partition("/")
        return self.root / validate_sid(sid) / name

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"no blob {key}") from None

    def path(self, key: str) -> Path:
        path = self._path(key)
        if not path.exists():
            raise NotFoundError(f"no blob {key}")
        return path

    def find(self, sid: str, prefix: str) -> str | None:
        """The key of the first blob of ``sid`` whose name starts with ``prefix``."""
        folder = self.root / validate_sid(sid)
        if not folder.is_dir():
            return None
        for child in sorted(folder.iterdir()):
            if child.name.startswith(prefix) and not child.name.endswith(".part"):
                return f"{sid}/{child.name}"
        return None
