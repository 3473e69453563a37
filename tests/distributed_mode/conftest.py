from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from evaluation.distributed import DistributedPlatform


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DistributedPlatform]:
    """Bridge, two workers and a gateway as processes on the real servers."""
    platform = DistributedPlatform(tmp_path, workers=2).start()
    yield platform
    if request.node.stash.get(_FAILED, False):
        print(platform.digest())
    platform.stop()
