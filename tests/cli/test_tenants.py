"""``voxwire tenants`` and ``voxwire usage`` on the embedded store, as a user runs
them: quotas set, shown with their use, refused when wrong, lifted; usage as a
table. The distributed store is the same code behind the same interface
(tests/store/test_usage_quotas.py runs both)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(400)


def _voxwire(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VOXWIRE_")},
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "voxwire.cli", *args],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        check=False,
    )


def test_quotas_are_set_shown_and_lifted(tmp_path: Path) -> None:
    created = _voxwire(tmp_path, "keys", "create", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key_id = re.findall(r"key id (\S+)", created.stdout)[0]

    listed = _voxwire(tmp_path, "tenants", "list")
    assert "acme" in listed.stdout and "none (unlimited)" in listed.stdout, listed.stdout

    set_ = _voxwire(
        tmp_path, "tenants", "set-quota", "acme", "--live-streams", "2",
        "--audio-hours-per-day", "1.5", "--upload-mb", "1",
    )  # fmt: skip
    assert set_.returncode == 0, set_.stderr
    assert "audio_seconds_per_day=5400" in set_.stdout and "upload_bytes=1048576" in set_.stdout
    keyed = _voxwire(
        tmp_path, "tenants", "set-quota", "acme", "--key", key_id, "--live-streams", "1"
    )
    assert keyed.returncode == 0, keyed.stderr

    shown = _voxwire(tmp_path, "tenants", "show", "acme")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"live_streams\s+│\s+tenant\s+│\s+2\s+│\s+0", shown.stdout), shown.stdout
    assert re.search(rf"live_streams\s+│\s+key {key_id}\s+│\s+1", shown.stdout), shown.stdout
    assert "UTC" in shown.stdout  # the day's quota resets at midnight

    wrong = _voxwire(tmp_path, "tenants", "set-quota", "nobody", "--live-streams", "1")
    assert wrong.returncode == 1 and "no tenant 'nobody'" in wrong.stderr
    none = _voxwire(tmp_path, "tenants", "set-quota", "acme")
    assert none.returncode == 1 and "no quota given" in none.stderr
    other_key = _voxwire(
        tmp_path, "tenants", "set-quota", "acme", "--key", "k_x", "--live-streams", "1"
    )
    assert other_key.returncode == 1 and "has no key k_x" in other_key.stderr
    bad_name = _voxwire(tmp_path, "tenants", "clear-quota", "acme", "streams")
    assert bad_name.returncode == 1 and "one of live_streams" in bad_name.stderr

    one = _voxwire(tmp_path, "tenants", "clear-quota", "acme", "live-streams")
    assert "1 quota(s) lifted" in one.stdout, one.stdout + one.stderr
    rest = _voxwire(tmp_path, "tenants", "clear-quota", "acme")
    assert "2 quota(s) lifted" in rest.stdout
    keyed_rest = _voxwire(tmp_path, "tenants", "clear-quota", "acme", "--key", key_id)
    assert "1 quota(s) lifted" in keyed_rest.stdout
    assert "no quotas: unlimited" in _voxwire(tmp_path, "tenants", "show", "acme").stdout


def test_usage_is_a_table_and_bad_dates_say_how(tmp_path: Path) -> None:
    assert _voxwire(tmp_path, "keys", "create", "--tenant", "acme").returncode == 0
    table = _voxwire(tmp_path, "usage", "--tenant", "acme", "--since", "2025-01-01")
    assert table.returncode == 0, table.stderr
    assert "usage 2025-01-01 to" in table.stdout and "total" in table.stdout
    bad = _voxwire(tmp_path, "usage", "--since", "yesterday")
    assert bad.returncode == 1 and "YYYY-MM-DD" in bad.stderr
