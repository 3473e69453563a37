from pathlib import Path

import pytest

from voxwire.core.config import load_settings
from voxwire.core.errors import ConfigError
from voxwire_client.config import ClientConfig, load_config, save_config


def test_client_config_file_then_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "client.json"
    save_config(ClientConfig(url="http://h:1", api_key="vxk_x", mqtt_url="mqtt://h:2"), path)
    assert path.stat().st_mode & 0o077 == 0
    assert load_config(path).url == "http://h:1"
    monkeypatch.setenv("VOXWIRE_URL", "http://other:9")
    monkeypatch.setenv("VOXWIRE_API_KEY", "vxk_env")
    config = load_config(path)
    assert (config.url, config.api_key, config.mqtt_url) == (
        "http://other:9",
        "vxk_env",
        "mqtt://h:2",
    )
    assert "vxk_env" not in repr(config)


def test_settings_layering(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "server.toml"
    path.write_text("http_port = 9100\nworkers = 2\n")
    monkeypatch.setenv("VOXWIRE_WORKERS", "3")
    settings = load_settings(path, mqtt_port=1999)
    assert (settings.http_port, settings.workers, settings.mqtt_port) == (9100, 3, 1999)


def test_bad_setting_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXWIRE_HTTP_PORT", "eighty")
    with pytest.raises(ConfigError, match="http_port"):
        load_settings(tmp_path / "none.toml")
