"""A local Hugging Face Hub: real files in the Hub's URL layout, for huggingface_hub.

It answers what ``huggingface_hub`` asks of a Hub (read in its source):

- ``GET /api/models/{owner}/{name}/revision/{rev}[?blobs=true]``: ``sha`` (the
  commit) and ``siblings`` with ``rfilename``, ``size``, ``blobId`` and, for LFS
  files (the weights), ``lfs`` with ``sha256``, ``size`` and ``pointerSize``;
- ``HEAD``/``GET /{owner}/{name}/resolve/{rev}/{file}``: the bytes, with
  ``X-Repo-Commit``, ``ETag`` (the git blob id, or the sha256 of an LFS file, which
  ``X-Linked-Etag`` and ``X-Linked-Size`` repeat) and ``Content-Length``;
- errors as the Hub gives them: ``X-Error-Code`` ``RepoNotFound``,
  ``RevisionNotFound``, ``EntryNotFound`` or ``GatedRepo`` (a repository that
  needs a token).

:attr:`HubServer.corrupt` names files served with one byte changed while the
API still describes the true file: what a broken mirror or a damaged transfer
gives. :attr:`HubServer.requests` records every request with its token.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_FROM = 10 * 1024 * 1024  # files this large are LFS files, as weights are on the Hub
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/revision/(?P<rev>[^/]+)$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


@dataclass(frozen=True)
class HubFile:
    path: Path
    size: int
    sha256: str
    blob_id: str
    lfs: bool

    @classmethod
    def of(cls, path: Path) -> HubFile:
        data = path.read_bytes()
        blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False)
        return cls(
            path,
            len(data),
            hashlib.sha256(data).hexdigest(),
            blob.hexdigest(),
            len(data) >= LFS_FROM,
        )

    def sibling(self, name: str) -> dict[str, object]:
        entry: dict[str, object] = {"rfilename": name, "size": self.size, "blobId": self.blob_id}
        if self.lfs:
            entry["lfs"] = {"sha256": self.sha256, "size": self.size, "pointerSize": 134}
        return entry


@dataclass
class HubServer:
    """Repositories at one commit each: ``repo -> (commit, {name: file})``."""

    repos: dict[str, tuple[str, dict[str, HubFile]]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    """Gated repositories and the token each needs."""
    corrupt: set[tuple[str, str]] = field(default_factory=set)
    """``(repo, file)`` served damaged."""
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """``(method, path, token)`` of every request."""
    url: str = ""

    def add(self, repo: str, commit: str, files: dict[str, Path]) -> None:
        self.repos[repo] = (commit, {name: HubFile.of(path) for name, path in files.items()})

    def downloads(self) -> list[str]:
        """The paths of the file bodies sent (GET of resolve URLs)."""
        return [p for m, p, _ in self.requests if m == "GET" and "/resolve/" in p]


def _handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            del format, args

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _fail(self, status: int, code: str, commit: str | None = None) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _answer(self, *, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            auth = self.headers.get("Authorization")
            token = auth.removeprefix("Bearer ") if auth else None
            hub.requests.append((self.command, path, token))
            match = _API.match(path) or _RESOLVE.match(path)
            if match is None or match["repo"] not in hub.repos:
                return self._fail(404, "RepoNotFound")
            repo, rev = match["repo"], match["rev"]
            commit, files = hub.repos[repo]
            if repo in hub.tokens and token != hub.tokens[repo]:
                return self._fail(401, "GatedRepo")
            if rev not in (commit, "main"):
                return self._fail(404, "RevisionNotFound")
            if path.startswith("/api/"):
                siblings = [f.sibling(name) for name, f in files.items()]
                data = json.dumps({"id": repo, "sha": commit, "siblings": siblings}).encode()
                return self._send(data if body else b"", len(data), {})
            name = match["file"]
            if name not in files:
                return self._fail(404, "EntryNotFound", commit)
            file = files[name]
            headers = {
                "X-Repo-Commit": commit,
                "ETag": f'"{file.sha256 if file.lfs else file.blob_id}"',
            }
            if file.lfs:
                headers |= {"X-Linked-Etag": f'"{file.sha256}"', "X-Linked-Size": str(file.size)}
            content = file.path.read_bytes() if body else b""
            if body and (repo, name) in hub.corrupt:
                content = content[:-1] + bytes([content[-1] ^ 0xFF])
            return self._send(content, file.size, headers)

        def _send(self, content: bytes, size: int, headers: dict[str, str]) -> None:
            self.send_response(200)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if content:
                self.wfile.write(content)

    return Handler


@contextmanager
def serve(hub: HubServer) -> Iterator[HubServer]:
    """Run ``hub`` on a free loopback port for the duration; ``hub.url`` is its address."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
