"""The client config keeps one entry per installation: starting one installation
does not erase another's key, the client takes the key of the installation it
talks to, and a file of the first format (one flat entry) is read and migrated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxwire_client.config import (
    INSTALLATION_ENV,
    ClientConfig,
    installations,
    load_config,
    save_config,
)
from voxwire_client.errors import ConfigurationError

DISTRIBUTED = ClientConfig(
    url="http://127.0.0.1:8000",
    api_key="vxk_dddddddd_distributed",
    mqtt_url="mqtt://127.0.0.1:11883",
    ws_url="ws://127.0.0.1:18083/mqtt",
    installation="postgres://127.0.0.1:15432/voxwire",
)
EMBEDDED = ClientConfig(
    url="http://127.0.0.1:8000",
    api_key="vxk_eeeeeeee_embedded",
    installation="sqlite:/home/me/.local/share/voxwire/voxwire.sqlite3",
)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("URL", "API_KEY", "MQTT_URL", "WS_URL", "MQTT_CA_FILE", "INSTALLATION"):
        monkeypatch.delenv(f"VOXWIRE_{name}", raising=False)


def test_two_installations_keep_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    save_config(DISTRIBUTED, path)  # make run-distributed
    save_config(EMBEDDED, path)  # then make run, on the same port
    assert load_config(path) == EMBEDDED  # the one started last
    assert load_config(path, installation=DISTRIBUTED.installation) == DISTRIBUTED
    save_config(DISTRIBUTED, path)  # and back
    assert load_config(path) == DISTRIBUTED
    assert load_config(path, installation=EMBEDDED.installation) == EMBEDDED
    current, entries = installations(path)
    assert current == DISTRIBUTED.installation and set(entries) == {
        DISTRIBUTED.installation,
        EMBEDDED.installation,
    }
    assert path.stat().st_mode & 0o077 == 0


def test_an_installation_is_chosen_by_name_or_by_its_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "client.json"
    other_port = ClientConfig(url="http://127.0.0.1:8001", api_key="vxk_ffffffff_other",
                              installation="postgres://db:5432/voxwire?namespace=blue")  # fmt: skip
    for config in (DISTRIBUTED, other_port, EMBEDDED):
        save_config(config, path)
    assert load_config(path, url="http://127.0.0.1:8001/") == other_port
    assert load_config(path, url="http://127.0.0.1:8000") == EMBEDDED  # the current one first
    assert load_config(path, url="http://elsewhere:1").api_key == EMBEDDED.api_key
    monkeypatch.setenv("VOXWIRE_URL", "http://127.0.0.1:8001")
    assert load_config(path).api_key == other_port.api_key
    monkeypatch.delenv("VOXWIRE_URL")
    monkeypatch.setenv(INSTALLATION_ENV, DISTRIBUTED.installation)
    assert load_config(path).api_key == DISTRIBUTED.api_key
    monkeypatch.setenv("VOXWIRE_API_KEY", "vxk_00000000_env")  # the environment still wins
    assert load_config(path).api_key == "vxk_00000000_env"
    monkeypatch.setenv(INSTALLATION_ENV, "postgres://nowhere/x")
    with pytest.raises(ConfigurationError, match="no installation") as refused:
        load_config(path)
    assert EMBEDDED.installation in str(refused.value.hint)


def test_a_first_format_file_is_read_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    flat = {"url": "http://127.0.0.1:8000", "api_key": "vxk_eeeeeeee_embedded",
            "mqtt_url": "mqtt://127.0.0.1:1883", "ws_url": "ws://127.0.0.1:8083/mqtt",
            "mqtt_ca_file": None}  # fmt: skip
    path.write_text(json.dumps(flat))
    old = load_config(path)
    assert (old.url, old.api_key, old.installation) == (flat["url"], flat["api_key"], "default")

    save_config(DISTRIBUTED, path)  # the old key survives, under "default"
    assert load_config(path, installation="default").api_key == flat["api_key"]
    save_config(EMBEDDED, path)  # the same key, now under its installation's name
    _, entries = installations(path)
    assert set(entries) == {DISTRIBUTED.installation, EMBEDDED.installation}
    assert json.loads(path.read_text())["v"] == 2


def test_an_unreadable_file_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot read client config") as refused:
        load_config(path)
    assert "voxwire up" in str(refused.value.hint)
    save_config(EMBEDDED, path)  # replaced by the next start
    assert load_config(path) == EMBEDDED
