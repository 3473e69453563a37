"""Blob storage for uploaded audio: local files by default, S3-compatible by config.

Keys are built by voxwire from the session id and fixed names, never from
user input (``<sid>/original.<ext>``, ``<sid>/audio.pcm``), so no upload name
can escape the store.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Protocol

from voxwire.core.config import Settings
from voxwire.core.errors import NotFoundError, VoxwireError
from voxwire_client.topics import validate_sid

_NAME = re.compile(r"[a-z0-9_.]{1,32}")


class BlobError(VoxwireError):
    code = "blob_store"


def blob_key(sid: str, name: str) -> str:
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"invalid blob name {name!r}")
    return f"{validate_sid(sid)}/{name}"


def _split(key: str) -> tuple[str, str]:
    sid, _, name = key.partition("/")
    return validate_sid(sid), blob_key(sid, name).partition("/")[2]


class BlobStore(Protocol):
    def key(self, sid: str, name: str) -> str: ...
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes:
        """Raises NotFoundError for a missing blob."""
        ...

    def find(self, sid: str, prefix: str) -> str | None:
        """The key of the first blob of ``sid`` whose name starts with ``prefix``."""
        ...

    def names(self, sid: str, prefix: str) -> dict[str, int]:
        """The blobs of ``sid`` whose names start with ``prefix``: name -> size."""
        ...

    def delete(self, key: str) -> None:
        """Remove a blob; nothing happens when there is none."""
        ...

    def delete_session(self, sid: str) -> int:
        """Remove every blob of ``sid`` (audio, parts, archive); how many there were."""
        ...


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def key(self, sid: str, name: str) -> str:
        return blob_key(sid, name)

    def _path(self, key: str) -> Path:
        sid, name = _split(key)
        return self.root / sid / name

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

    def find(self, sid: str, prefix: str) -> str | None:
        return next((f"{sid}/{name}" for name in self.names(sid, prefix)), None)

    def names(self, sid: str, prefix: str) -> dict[str, int]:
        folder = self.root / validate_sid(sid)
        if not folder.is_dir():
            return {}
        return {
            child.name: child.stat().st_size
            for child in sorted(folder.iterdir())
            if child.name.startswith(prefix) and not child.name.endswith(".part")
        }

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def delete_session(self, sid: str) -> int:
        folder = self.root / validate_sid(sid)
        if not folder.is_dir():
            return 0
        removed = 0
        for child in folder.iterdir():  # names are flat: blob_key allows no folders
            child.unlink(missing_ok=True)
            removed += 1
        folder.rmdir()
        return removed


class S3BlobStore:
    """Any S3-compatible object store (AWS S3, MinIO, Ceph, ...), through boto3."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        self._s3 = client
        self._bucket = bucket
        self._prefix = prefix

    @classmethod
    def from_settings(cls, settings: Settings) -> S3BlobStore:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=settings.blobs.s3_endpoint_url or None,
            region_name=settings.blobs.s3_region,
            aws_access_key_id=settings.blobs.s3_access_key.get_secret_value() or None,
            aws_secret_access_key=settings.blobs.s3_secret_key.get_secret_value() or None,
        )
        return cls(client, settings.blobs.s3_bucket, settings.namespace)

    def key(self, sid: str, name: str) -> str:
        return blob_key(sid, name)

    def _object(self, key: str) -> str:
        sid, name = _split(key)
        return f"{self._prefix}/{sid}/{name}" if self._prefix else f"{sid}/{name}"

    def put(self, key: str, data: bytes) -> None:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=self._object(key), Body=data)
        except Exception as exc:  # botocore raises many kinds; all mean "not stored"
            raise BlobError(
                f"cannot store {key} in bucket {self._bucket}: {exc}",
                hint="check the s3_* settings and that the bucket exists",
            ) from exc

    def get(self, key: str) -> bytes:
        try:
            response = self._s3.get_object(Bucket=self._bucket, Key=self._object(key))
        except self._s3.exceptions.NoSuchKey:
            raise NotFoundError(f"no blob {key}") from None
        except Exception as exc:
            raise BlobError(f"cannot read {key} from bucket {self._bucket}: {exc}") from exc
        body: bytes = response["Body"].read()
        return body

    def find(self, sid: str, prefix: str) -> str | None:
        return next((f"{sid}/{name}" for name in self.names(sid, prefix)), None)

    def names(self, sid: str, prefix: str) -> dict[str, int]:
        folder = self._object(blob_key(sid, "x"))[:-1]
        found: dict[str, int] = {}
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=folder + prefix
            )
            for page in pages:
                for item in page.get("Contents", []):
                    found[item["Key"][len(folder) :]] = int(item["Size"])
        except Exception as exc:
            raise BlobError(f"cannot list {sid} in bucket {self._bucket}: {exc}") from exc
        return dict(sorted(found.items()))

    def delete(self, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=self._bucket, Key=self._object(key))
        except Exception as exc:
            raise BlobError(f"cannot delete {key} from bucket {self._bucket}: {exc}") from exc

    def delete_session(self, sid: str) -> int:
        names = self.names(sid, "")
        for name in names:
            self.delete(blob_key(sid, name))
        return len(names)


def open_blob_store(settings: Settings) -> BlobStore:
    if settings.blobs.store == "s3":
        return S3BlobStore.from_settings(settings)
    return LocalBlobStore(settings.blob_dir)
