"""Both blob stores behave the same: local files and an S3-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3 import make_bucket, s3_server
from voxwire.blobs import BlobStore, LocalBlobStore, S3BlobStore
from voxwire.core.config import Settings
from voxwire.core.errors import NotFoundError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "local":
        yield LocalBlobStore(tmp_path)
        return
    with s3_server() as url:
        make_bucket(url, "audio")
        settings = Settings(
            blob_store="s3",
            s3_endpoint_url=url,
            s3_bucket="audio",
            s3_access_key="test",
            s3_secret_key="test",
            namespace="ns1",
        )
        yield S3BlobStore.from_settings(settings)


def test_put_get_find(store: BlobStore) -> None:
    key = store.key("s_1", "audio.pcm")
    store.put(key, b"\x01\x02" * 1000)
    store.put(store.key("s_1", "original.flac"), b"fLaC")
    assert store.get(key) == b"\x01\x02" * 1000
    assert store.find("s_1", "original.") == "s_1/original.flac"
    assert store.get(store.find("s_1", "original.") or "") == b"fLaC"
    assert store.find("s_2", "original.") is None


def test_names_list_what_a_session_holds_and_delete_removes_it(store: BlobStore) -> None:
    for n, size in ((2, 5), (0, 3), (1, 4)):
        store.put(store.key("s_1", f"part_{n:05d}"), b"x" * size)
    store.put(store.key("s_1", "original.wav"), b"RIFF")
    store.put(store.key("s_2", "part_00000"), b"y")
    assert store.names("s_1", "part_") == {"part_00000": 3, "part_00001": 4, "part_00002": 5}
    store.delete(store.key("s_1", "part_00001"))
    store.delete(store.key("s_1", "part_00001"))  # gone already: nothing happens
    assert list(store.names("s_1", "part_")) == ["part_00000", "part_00002"]
    assert store.names("s_3", "") == {}
    assert store.get(store.key("s_2", "part_00000")) == b"y"


def test_missing_blob_is_not_found(store: BlobStore) -> None:
    with pytest.raises(NotFoundError):
        store.get(store.key("s_1", "nothing.pcm"))


@pytest.mark.parametrize(
    ("sid", "name"), [("../etc", "passwd"), ("s_1", "../x"), ("s_1", "a/b"), ("s/1", "audio.pcm")]
)
def test_hostile_names_never_reach_the_store(store: BlobStore, sid: str, name: str) -> None:
    with pytest.raises(ValueError):
        store.key(sid, name)
