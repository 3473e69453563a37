from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from voxwire.core.config import FLAT_NAMES, GROUPS, EngineSettings, Settings, load_settings
from voxwire.core.errors import ConfigError
from voxwire_client.api import RedactMode
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
    assert (settings.listen.http_port, settings.engine.workers, settings.listen.mqtt_port) == (
        9100,
        3,
        1999,
    )


def test_bad_setting_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXWIRE_HTTP_PORT", "eighty")
    with pytest.raises(ConfigError, match="http_port"):
        load_settings(tmp_path / "none.toml")


def test_flat_environment_names_reach_their_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXWIRE_HTTP_PORT", "9200")
    monkeypatch.setenv("VOXWIRE_ENGINE", "whispercpp")
    monkeypatch.setenv("VOXWIRE_S3_BUCKET", "audio")
    monkeypatch.setenv("VOXWIRE_BLOB_STORE", "s3")
    monkeypatch.setenv("VOXWIRE_MAX_AUDIO_S", "60")
    monkeypatch.setenv("VOXWIRE_KAFKA_BOOTSTRAP", "kafka:9092")
    monkeypatch.setenv("VOXWIRE_HOOK_SECRET", "hook-secret-value")
    monkeypatch.setenv("VOXWIRE_NAMESPACE", "ns1")
    settings = load_settings(tmp_path / "none.toml")
    assert settings.listen.http_port == 9200
    assert settings.engine.name == "whispercpp"
    assert (settings.blobs.store, settings.blobs.s3_bucket) == ("s3", "audio")
    assert settings.limits.max_audio_s == 60
    assert settings.servers.kafka_bootstrap == "kafka:9092"
    assert settings.security.hook_secret.get_secret_value() == "hook-secret-value"
    assert settings.namespace == "ns1"
    assert "hook-secret-value" not in repr(settings)


def test_flat_toml_keys_and_group_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "server.toml"
    path.write_text(
        'engine = "whispercpp"\nmodel = "base.en"\nmqtt_password = "pw"\n'
        "[listen]\nws_port = 9300\n[limits]\nrate_limit_burst = 7\n"
    )
    monkeypatch.setenv("VOXWIRE_WORKERS", "4")
    monkeypatch.delenv("VOXWIRE_MQTT_PASSWORD", raising=False)  # the services' own, if loaded
    settings = load_settings(path, host="0.0.0.0")
    assert (settings.engine.name, settings.engine.model, settings.engine.workers) == (
        "whispercpp",
        "base.en",
        4,
    )
    assert (settings.listen.ws_port, settings.listen.host) == (9300, "0.0.0.0")
    assert settings.limits.rate_limit_burst == 7
    assert settings.servers.mqtt_password.get_secret_value() == "pw"


def test_flat_keyword_arguments(tmp_path: Path) -> None:
    settings = Settings(
        http_port=0, engine="whispercpp", s3_region="eu-west-1", redact="mask", data_dir=tmp_path
    )
    assert settings.listen.http_port == 0
    assert settings.engine.name == "whispercpp"
    assert settings.blobs.s3_region == "eu-west-1"
    assert settings.security.redact is RedactMode.MASK
    assert settings.data_dir == tmp_path
    grouped = Settings(engine=EngineSettings(model="small.en"), workers=3)
    assert (grouped.engine.model, grouped.engine.workers) == ("small.en", 3)


def test_an_unknown_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid setting http_prot"):
        load_settings(tmp_path / "none.toml", http_prot=1)
    path = tmp_path / "server.toml"
    path.write_text("[listen]\nhttp_prot = 1\n")
    with pytest.raises(ConfigError, match="invalid setting http_prot"):
        load_settings(path)
    with pytest.raises(ValidationError, match="http_prot"):
        Settings(http_prot=1)


def test_a_bad_grouped_value_names_the_flat_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXWIRE_ENGINE", "whisper")
    with pytest.raises(ConfigError, match="invalid setting engine") as caught:
        load_settings(tmp_path / "none.toml")
    assert "VOXWIRE_ENGINE" in (caught.value.hint or "")


def test_bound_ports_replace_only_the_ports() -> None:
    settings = Settings(http_port=0, mqtt_port=0, host="0.0.0.0")
    bound = settings.with_ports(http_port=8123, mqtt_port=1884)
    assert (bound.listen.http_port, bound.listen.mqtt_port) == (8123, 1884)
    assert bound.listen.host == "0.0.0.0"
    assert settings.listen.http_port == 0
    with pytest.raises(ValueError, match="host"):
        settings.with_ports(host=1)


def _groups(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    yield model
    for field in model.model_fields.values():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _groups(field.annotation)


def test_each_settings_group_has_at_most_15_fields() -> None:
    groups = list(_groups(Settings))
    assert len(groups) == 1 + len(GROUPS)
    for group in groups:
        assert len(group.model_fields) <= 15, group.__name__


def test_every_flat_name_is_one_setting() -> None:
    top = [name for name in Settings.model_fields if name not in GROUPS]
    assert not set(top) & set(FLAT_NAMES)
    assert len(top) + len(FLAT_NAMES) == 78


def test_a_tls_websocket_listener_needs_both_files_and_gives_wss(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("certificate")
    key.write_text("key")
    settings = Settings(ws_tls_cert=cert, ws_tls_key=key, ws_port=8443)
    assert settings.broker_urls[1] == "wss://127.0.0.1:8443/mqtt"
    assert Settings().broker_urls[1].startswith("ws://")
    with pytest.raises(ConfigError, match="go together"):
        Settings(ws_tls_cert=cert)
    with pytest.raises(ConfigError, match="does not exist"):
        Settings(ws_tls_cert=cert, ws_tls_key=tmp_path / "missing.pem")
