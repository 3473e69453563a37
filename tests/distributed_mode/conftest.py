from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed import DistributedPlatform


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DistributedPlatform]:
    """Bridge, two workers and a gateway as processes on the real servers."""
    platform = DistributedPlatform(tmp_path, workers=2).start()
    yield platform
    platform.stop()
