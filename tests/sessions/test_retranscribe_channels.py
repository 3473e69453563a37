"""Which channel tracks a re-transcription finds in a session's blobs: all of
them in channel order, none when one is missing or only a redacted upload's
incoming ones are left (the end to end check is in tests/e2e/test_channels.py)."""

from __future__ import annotations

from pathlib import Path

from voxwire.blobs import LocalBlobStore
from voxwire.sessions.audio import AUDIO_BLOB, track_blob
from voxwire.sessions.retranscribe_channels import stored_tracks

SID = "s_call"


def _store(tmp_path: Path, *names: str) -> LocalBlobStore:
    blobs = LocalBlobStore(tmp_path)
    for name in (AUDIO_BLOB, *names):
        blobs.put(blobs.key(SID, name), b"\0\0")
    return blobs


def test_the_tracks_come_in_channel_order(tmp_path: Path) -> None:
    names = [track_blob(n) for n in (10, 2, 1, 3, 4, 5, 6, 7, 8, 9)]
    blobs = _store(tmp_path, *names)
    assert stored_tracks(blobs, SID) == tuple(blobs.key(SID, track_blob(n)) for n in range(1, 11))


def test_a_session_without_all_its_tracks_has_none(tmp_path: Path) -> None:
    assert stored_tracks(_store(tmp_path / "mono"), SID) == ()
    assert stored_tracks(_store(tmp_path / "gap", track_blob(2)), SID) == ()
    incoming = _store(tmp_path / "redacted", track_blob(1, incoming=True))
    assert stored_tracks(incoming, SID) == ()
