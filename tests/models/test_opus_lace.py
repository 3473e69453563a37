"""``opus-lace``: libopus with LACE, built from its pinned sources into the cache.

`make test` installs it first (the real download and build); these tests use
that build and check what happens when the sources, the tools or the built file
are not what they should be."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tarfile
from pathlib import Path

import pytest

from voxwire.audio.libopus import LACE_COMPLEXITY
from voxwire.core.errors import ModelError
from voxwire.models import opus
from voxwire.platform.roles import opus_decoder


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VOXWIRE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_installed_build_is_libopus_1_5_with_lace() -> None:
    library = opus.library()
    assert library is not None, "voxwire models install opus-lace (make test does it first)"
    assert library.version == f"libopus {opus.VERSION}"
    stamp = json.loads((opus.folder() / "voxwire.json").read_text())
    assert "--enable-osce" in stamp["configure"] and stamp["sha256"] == opus.SHA256
    assert library.decoder(16_000).complexity == LACE_COMPLEXITY


def test_a_worker_without_it_decodes_with_ffmpeg_and_says_how_to_install(
    empty_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert not opus.is_installed() and opus.library() is None
    with caplog.at_level(logging.INFO):
        assert opus_decoder() is None
    assert "voxwire models install opus-lace" in caplog.text


def test_sources_that_do_not_match_the_pin_install_nothing(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = tmp_path / "opus_1.5.2.orig.tar.gz"
    forged.write_bytes(b"not the release" * 1000)
    monkeypatch.setattr(opus, "SOURCE_URL", forged.as_uri())
    with pytest.raises(ModelError, match="do not match their pinned checksum") as raised:
        opus.install()
    assert forged.as_uri() in (raised.value.hint or "")  # what served the wrong file
    assert not opus.is_installed() and not opus.folder().exists()
    assert not list((empty_cache / "packages").iterdir())  # no partial download kept


def test_sources_reaching_outside_their_folder_are_refused(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even sources that match their pin unpack only plain files inside the build folder."""
    hostile = tmp_path / "opus_1.5.2.orig.tar.gz"
    with tarfile.open(hostile, "w:gz") as archive:
        member = tarfile.TarInfo("../../escaped")
        member.size = 1
        archive.addfile(member, io.BytesIO(b"x"))
    monkeypatch.setattr(opus, "SOURCE_URL", hostile.as_uri())
    monkeypatch.setattr(opus, "SIZE", hostile.stat().st_size)
    monkeypatch.setattr(opus, "SHA256", hashlib.sha256(hostile.read_bytes()).hexdigest())
    with pytest.raises(ModelError, match="not a plain file inside it"):
        opus.install()
    assert not opus.folder().exists()


def test_no_compiler_is_a_clear_error(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ModelError, match="needs a C compiler and make") as raised:
        opus.install()
    assert "apt-get install gcc make" in (raised.value.hint or "")
    assert not opus.folder().exists()


def test_a_damaged_build_is_reported_and_the_worker_falls_back(
    empty_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    built = opus.folder()
    built.mkdir(parents=True)
    stamp = {"sha256": opus.SHA256, "configure": list(opus.CONFIGURE)}
    (built / "voxwire.json").write_text(json.dumps(stamp))
    (built / "libopus.so").write_bytes(b"\x7fELF but not really")
    assert opus.is_installed()
    with pytest.raises(ModelError, match="not a usable libopus") as raised:
        opus.library()
    assert "voxwire models install opus-lace" in (raised.value.hint or "")
    with caplog.at_level(logging.WARNING):
        assert opus_decoder() is None
    assert "FFmpeg's decoder" in caplog.text


def test_a_library_named_in_the_environment_is_used_instead(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in the container image, whose build is not in the cache Kubernetes mounts."""
    monkeypatch.delenv("VOXWIRE_CACHE_DIR")
    built = opus.folder() / "libopus.so"
    monkeypatch.setenv("VOXWIRE_CACHE_DIR", str(empty_cache))
    monkeypatch.setenv("VOXWIRE_OPUS_LIBRARY", str(built))
    library = opus.library()
    assert library is not None and library.path == built
    monkeypatch.setenv("VOXWIRE_OPUS_LIBRARY", str(empty_cache / "nothing.so"))
    with pytest.raises(ModelError, match="not a usable libopus"):
        opus.library()
