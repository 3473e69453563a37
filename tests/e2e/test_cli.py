"""The command line as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation.corpus import EVAL_DIR
from evaluation.speech import have_espeak
from tests.helpers import PlatformThread
from voxwire.cli.installation import installation_name
from voxwire.core.config import Settings
from voxwire_client.config import ClientConfig, installations, save_config

pytestmark = [pytest.mark.timeout(180), pytest.mark.any_engine]


def _voxwire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxwire.cli", *args],
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_help_lists_the_commands() -> None:
    result = _voxwire("--help")
    assert result.returncode == 0
    for command in ("up", "transcribe", "models", "keys", "contract"):
        assert command in result.stdout


def test_transcribe_prints_segments_matches_and_transcript(platform: PlatformThread) -> None:
    env = {
        "VOXWIRE_URL": platform.url,
        "VOXWIRE_API_KEY": platform.api_key,
        "VOXWIRE_MQTT_URL": platform.mqtt_url,
        "COLUMNS": "200",
    }
    result = _voxwire(
        "transcribe", str(EVAL_DIR / "audio" / "whisper_jfk.flac"), "--prompt", "ask not", env=env
    )
    assert result.returncode == 0, result.stderr
    assert "match 'ask not'" in result.stdout
    assert "ask what you can do for your country" in result.stdout.lower()
    as_json = _voxwire(
        "transcribe", str(EVAL_DIR / "audio" / "whisper_jfk.flac"), "--json", env=env
    )
    assert as_json.returncode == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert body["segments"] and "country" in body["text"]


def test_transcribe_without_a_platform_says_what_to_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {
        "VOXWIRE_URL": "http://127.0.0.1:9",
        "VOXWIRE_API_KEY": "vxk_00000000_x",
        "VOXWIRE_CONFIG_DIR": str(tmp_path),
    }
    result = _voxwire("transcribe", str(EVAL_DIR / "audio" / "whisper_jfk.flac"), env=env)
    assert result.returncode == 1
    assert "cannot reach the gateway" in result.stderr
    assert "make run" in result.stderr


def test_transcribe_refuses_a_missing_file() -> None:
    result = _voxwire("transcribe", "/nonexistent/file.wav")
    assert result.returncode == 2
    assert "does not exist" in result.stderr.lower() or "not exist" in result.stderr.lower()


def test_redact_must_be_one_of_the_modes() -> None:
    result = _voxwire("transcribe", str(EVAL_DIR / "audio" / "whisper_jfk.flac"), "--redact", "all")
    assert result.returncode == 2
    for mode in ("off", "mask", "entity", "numbers"):
        assert mode in result.stderr


@pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech")
@pytest.mark.parametrize("command", ["transcribe", "stream"])
def test_transcribe_and_stream_redact_what_they_are_told(
    platform: PlatformThread, tmp_path: Path, command: str
) -> None:
    wav = tmp_path / "said.wav"
    said = "My card number is 4111 1111 1111 1112. We sold 2,500 boxes."
    subprocess.run(["espeak-ng", "-w", str(wav), said], check=True, capture_output=True)
    env = {
        "VOXWIRE_URL": platform.url,
        "VOXWIRE_API_KEY": platform.api_key,
        "VOXWIRE_MQTT_URL": platform.mqtt_url,
        "COLUMNS": "200",
    }
    extra = ["--speed", "4"] if command == "stream" else []
    result = _voxwire(command, str(wav), "--redact", "numbers", *extra, env=env)
    assert result.returncode == 0, result.stderr
    transcript = result.stdout.split("transcript")[-1]
    # tiny.en hears "my car number is": a number after "my ... number" is personal
    assert "number is [" in transcript.lower(), result.stdout  # the platform default is off
    assert not re.search(r"\d", transcript), result.stdout


def test_make_run_after_make_run_distributed_keeps_both_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user tried it: an older `make run` left its key (first file format),
    `make run-distributed` wrote its own, then `make run` again: both keys stay,
    and the CLI uses the embedded platform's key to talk to it."""
    for name in ("URL", "API_KEY", "MQTT_URL", "WS_URL", "MQTT_CA_FILE", "INSTALLATION", "MODE"):
        monkeypatch.delenv(f"VOXWIRE_{name}", raising=False)
    env = {
        "VOXWIRE_CONFIG_DIR": str(tmp_path / "config"),
        "VOXWIRE_CONFIG": str(tmp_path / "server.toml"),
        "VOXWIRE_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
    }
    created = _voxwire("keys", "create", env=env)
    assert created.returncode == 0, created.stderr
    embedded_key = re.findall(r"vxk_\w+_[\w-]+", created.stdout)[0]
    path = tmp_path / "config" / "client.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"url": "http://127.0.0.1:8000", "api_key": embedded_key}))
    distributed = installation_name(Settings(mode="distributed"))
    save_config(ClientConfig(api_key="vxk_dddddddd_distributed", installation=distributed), path)

    command = [sys.executable, "-m", "voxwire.cli", "up"]
    command += ["--http-port", "0", "--mqtt-port", "0", "--ws-port", "0"]
    log = (tmp_path / "up.log").open("wb")
    up = subprocess.Popen(command, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not str(installations(path)[0]).startswith("sqlite:"):
            running = up.poll() is None and time.monotonic() < deadline
            assert running, (tmp_path / "up.log").read_text()
            time.sleep(0.5)
        current, entries = installations(path)
        assert entries[str(current)].api_key == embedded_key
        assert entries[distributed].api_key == "vxk_dddddddd_distributed"
        assert set(entries) == {current, distributed}  # the old entry moved, not copied

        result = _voxwire("transcribe", str(EVAL_DIR / "audio" / "whisper_jfk.flac"), env=env)
        assert result.returncode == 0, result.stderr
        assert "country" in result.stdout.lower()
    finally:
        up.terminate()
        up.wait(30)
        log.close()
