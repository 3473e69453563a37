"""The servers of scripts/services.sh as the serial tests handle them: a
server's pid (from its pid file, where ``VOXWIRE_SERVICES_DIR`` puts them) and
a server frozen for a while (SIGSTOP: its connections stay open, nothing
answers). Without the pid file the test is skipped, and fails in CI."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def service_pid(name: str) -> int:
    """The pid of the server ``name`` that scripts/services.sh started."""
    state = Path(os.environ.get("VOXWIRE_SERVICES_DIR") or REPO / ".services")
    pid_file = state / name / "pid"
    if not pid_file.exists():
        reason = f"no {pid_file}: this test freezes the {name} that scripts/services.sh started"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return int(pid_file.read_text().split()[0])


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process ``pid`` stopped (SIGSTOP) inside the block, continued after it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
