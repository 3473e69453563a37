"""A session's stored audio in both blob stores: a redacted session's is stored
with its redacted spans silenced (re-transcriptions add theirs), its original is
served only where it was kept, and a session without redaction serves its upload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.s3 import make_bucket, s3_server
from voxwire.blobs import BlobStore, LocalBlobStore, S3BlobStore
from voxwire.core.config import Settings
from voxwire.core.errors import NotFoundError
from voxwire.sessions.audio import (
    Redaction,
    original_audio,
    pcm_to_wav,
    read_redaction,
    served_audio,
    store_redacted,
)
from voxwire_client.messages import SegmentData, WordData

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["local", "s3"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
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
        )
        yield S3BlobStore.from_settings(settings)


def _final(index: int, word: str, start: int, end: int) -> SegmentData:
    return SegmentData(
        id=f"s-{index}",
        index=index,
        start_ms=start - 200,
        end_ms=end + 200,
        text=f"It is {word}.",
        words=(WordData(word=f" {word}.", start_ms=start, end_ms=end, probability=0.9),),
    )


def test_redacted_audio_is_stored_silenced_and_the_original_only_when_kept(
    blobs: BlobStore,
) -> None:
    pcm = np.full(16 * 3_000, 1_000, dtype="<i2").tobytes()  # 3 s of a constant
    done = store_redacted(blobs, "s1", pcm, Redaction([_final(0, "[NUMBER]", 1_000, 1_400)]))
    assert done.spans_ms == ((900, 1_500),) and done.pad_ms == 100
    served = served_audio(blobs, "s1")
    samples = np.frombuffer(served.data[44:], dtype="<i2")
    assert served.media_type == "audio/wav" and len(samples) == 16 * 3_000
    assert not samples[16 * 900 : 16 * 1_500].any() and (samples[: 16 * 900] == 1_000).all()
    with pytest.raises(NotFoundError, match="original was not kept"):
        original_audio(blobs, "s1")

    # a re-transcription finds more: both spans silenced, the first one kept
    again = Redaction([_final(0, "****", 2_000, 2_300)], version=2)
    stored = blobs.get(blobs.key("s1", "audio.pcm"))
    assert store_redacted(blobs, "s1", stored, again).spans_ms == ((900, 1_500), (1_900, 2_400))
    done = read_redaction(blobs, "s1")
    assert done is not None and done.words_ms == ((1_000, 1_400), (2_000, 2_300))

    kept = Redaction([_final(0, "[NUMBER]", 1_000, 1_400)], keep_original=True)
    store_redacted(blobs, "s3", pcm, kept)
    assert original_audio(blobs, "s3").data == pcm_to_wav(pcm)
    assert served_audio(blobs, "s3").data != pcm_to_wav(pcm)


def test_a_session_without_redaction_serves_its_upload_as_it_came(blobs: BlobStore) -> None:
    with pytest.raises(NotFoundError, match="no audio stored"):
        served_audio(blobs, "s2")
    blobs.put(blobs.key("s2", "original.mp3"), b"ID3 an mp3")
    blobs.put(blobs.key("s2", "audio.pcm"), bytes(320))
    for audio in (served_audio(blobs, "s2"), original_audio(blobs, "s2")):
        assert (audio.data, audio.media_type) == (b"ID3 an mp3", "audio/mpeg")
    assert read_redaction(blobs, "s2") is None
