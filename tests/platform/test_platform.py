"""The composition root: name maps, mode presets, refused combinations, keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from voxwire.core.config import FLAT_NAMES, GROUPS, Settings, load_settings
from voxwire.core.errors import ConfigError
from voxwire.platform import ROLES, build
from voxwire.platform.brokers import BROKERS
from voxwire.platform.choices import BLOBS, BUSES, SEARCHES, STORES, choose
from voxwire.platform.roles import check_roles

MAPS: dict[str, Mapping[str, object]] = {
    "bus": BUSES,
    "store": STORES,
    "search": SEARCHES,
    "blob_store": BLOBS,
    "broker": BROKERS,
}


@pytest.mark.parametrize("setting", sorted(MAPS))
def test_a_name_map_refuses_an_unknown_name(setting: str) -> None:
    table = MAPS[setting]
    with pytest.raises(ConfigError) as caught:
        choose(setting, table, "rabbit")
    error = caught.value
    assert "rabbit" in error.message and setting in error.message
    assert error.hint is not None and f"VOXWIRE_{setting.upper()}" in error.hint
    assert all(name in error.hint for name in table)


@pytest.mark.parametrize("setting", sorted(MAPS))
def test_every_name_a_setting_takes_is_in_its_map(setting: str) -> None:
    group, name = FLAT_NAMES.get(setting, ("", setting))
    field = (GROUPS[group] if group else Settings).model_fields[name]
    names = set(getattr(field.annotation, "__args__", ()))
    assert names == set(MAPS[setting])


def test_an_unknown_name_in_the_settings_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bus"):
        load_settings(tmp_path / "none.toml", bus="rabbit")


async def test_adapters_refuse_a_name_that_bypassed_validation(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path).model_copy(update={"bus": "rabbit"})
    async with build(settings) as platform:
        with pytest.raises(ConfigError, match="unknown bus 'rabbit'"):
            await platform.adapters.bus()


def test_mode_is_a_preset_that_explicit_settings_override() -> None:
    embedded = Settings()
    assert (embedded.bus, embedded.store, embedded.search, embedded.broker) == (
        "memory",
        "sqlite",
        "sqlite",
        "embedded",
    )
    distributed = Settings(mode="distributed")
    assert (distributed.bus, distributed.store, distributed.search, distributed.broker) == (
        "kafka",
        "postgres",
        "opensearch",
        "external",
    )
    mixed = Settings(mode="distributed", search="sqlite")
    assert (mixed.bus, mixed.search) == ("kafka", "sqlite")


def test_the_environment_chooses_an_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXWIRE_BUS", "kafka")
    settings = load_settings(tmp_path / "none.toml")
    assert (settings.mode, settings.bus, settings.store) == ("embedded", "kafka", "sqlite")


def test_the_embedded_broker_takes_any_store() -> None:
    settings = Settings(store="postgres")
    assert (settings.broker, settings.store) == ("embedded", "postgres")


def test_an_external_broker_needs_an_mqtt_url() -> None:
    with pytest.raises(ConfigError, match="mqtt://"):
        Settings(mode="distributed", mqtt_url="http://broker:1883")
    assert Settings(mqtt_url="http://ignored").broker == "embedded"


def test_every_role_runs_in_one_process_on_any_adapters() -> None:
    assert check_roles(Settings(), ["gateway", "bridge", "worker"]) == ROLES
    assert check_roles(Settings(mode="distributed"), ROLES) == ROLES


@pytest.mark.parametrize(
    ("override", "setting"),
    [
        ({"mode": "embedded"}, "bus=memory"),
        ({"mode": "distributed", "bus": "memory"}, "bus=memory"),
        ({"mode": "distributed", "broker": "embedded", "store": "sqlite"}, "broker=embedded"),
        ({"mode": "distributed", "store": "sqlite"}, "store=sqlite"),
        ({"mode": "distributed", "search": "sqlite"}, "search=sqlite"),
    ],
)
def test_a_role_alone_refuses_what_lives_in_one_process(
    override: dict[str, str], setting: str
) -> None:
    settings = Settings.model_validate(override)
    with pytest.raises(ConfigError, match=setting) as caught:
        build(settings, ["worker"])
    assert caught.value.hint is not None and "voxwire up" in caught.value.hint


def test_a_role_alone_runs_on_shared_servers() -> None:
    assert build(Settings(mode="distributed"), ["bridge"]).roles == ("bridge",)


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ConfigError, match="relay"):
        build(Settings(mode="distributed"), ["relay"])


async def test_ensure_key_creates_the_first_key_only(tmp_path: Path) -> None:
    async with build(Settings(data_dir=tmp_path)) as platform:
        first = await platform.ensure_key()
        again = await platform.ensure_key()
        store = await platform.adapters.store()
        assert first.key is not None and again.key is None
        tenant = await store.verify_api_key(first.key.plaintext)
        assert tenant is not None and tenant.name == "default"
    again_after_stop = await platform.ensure_key()
    await platform.stop()
    assert again_after_stop.key is None


async def test_a_device_key_is_no_key_for_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store holding only a device key gets a tenant key at start-up, and a device
    key in ``VOXWIRE_API_KEY`` is not taken for the client config."""
    from voxwire.cli.installation import known_key

    settings = Settings(data_dir=tmp_path)
    async with build(settings) as platform:
        _, device = await platform.create_key("default", "kitchen-mic", "device")
        boot = await platform.ensure_key()
        assert boot.key is not None and boot.key.key_id != device.key_id
        store = await platform.adapters.store()
        monkeypatch.setenv("VOXWIRE_CONFIG_DIR", str(tmp_path / "config"))
        monkeypatch.setenv("VOXWIRE_API_KEY", device.plaintext)
        assert await known_key(store, settings) is None
        monkeypatch.setenv("VOXWIRE_API_KEY", boot.key.plaintext)
        assert await known_key(store, settings) == boot.key.plaintext


def test_clients_are_told_the_broker_the_settings_choose() -> None:
    embedded = Settings(host="0.0.0.0", public_host="vx.example", mqtt_port=1999, ws_port=2000)
    assert embedded.broker_urls == ("mqtt://vx.example:1999", "ws://vx.example:2000/mqtt")
    external = Settings(broker="external", mqtt_url="mqtts://mq:8883", ws_url="wss://mq/mqtt")
    assert external.broker_urls == ("mqtts://mq:8883", "wss://mq/mqtt")
