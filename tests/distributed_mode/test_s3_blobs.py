"""Distributed mode with audio in S3-compatible storage instead of a shared folder."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform
from tests.s3 import make_bucket, s3_server
from voxwire_client import Client

pytestmark = pytest.mark.timeout(300)


def test_uploads_go_through_s3(tmp_path: Path) -> None:
    with s3_server() as url:
        make_bucket(url, "voxwire-audio")
        platform = DistributedPlatform(
            tmp_path,
            blob_store="s3",
            s3_endpoint_url=url,
            s3_bucket="voxwire-audio",
            s3_access_key="test",
            s3_secret_key="test",
        ).start()
        try:
            path = EVAL_DIR / "audio" / "whisper_jfk.flac"
            with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
                result = client.transcribe(path)
            assert "country" in result.text
            audio = httpx.get(
                f"{platform.url}/v1/sessions/{result.sid}/audio",
                headers={"Authorization": f"Bearer {platform.api_key}"},
            )
            assert audio.status_code == 200 and audio.content == path.read_bytes()
            assert not (tmp_path / "shared" / "audio").exists()  # nothing on the local disk
        finally:
            platform.stop()
