"""Models from the Hugging Face Hub, fetched through the real huggingface_hub client
from a local server in the Hub's URL layout (:mod:`tests.models.hub_server`).

The server holds real files: the bundled tiny.en checkpoint, which is byte for
byte ``Systran/faster-whisper-tiny.en`` at commit 0d3d19a3 (the pinned sizes and
sha256 below are the Hub's own), and a whisper.cpp file converted from it. A
catalog entry for them joins the real catalog for these tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.models.conftest import EVAL_DIR, JFK_ID, Converted, reference_text, wer
from tests.models.hub_server import HubServer, serve
from tests.models.test_catalog import transcribe
from voxwire.cli import app
from voxwire.models import registry
from voxwire.models.catalog import CHECKPOINTS, Checkpoint, HubFile, HubSource
from voxwire.models.registry import _bundled_dir, validate

NAME = "hub-tiny.en"
CT2_REPO = "Systran/faster-whisper-tiny.en"
CT2_COMMIT = "0d3d19a32d3338f10357c0889762bd8d64bbdeba"
GGML_REPO = "voxwire-test/whisper.cpp-tiny.en"
GGML_COMMIT = "7" * 40
TOKEN = "hf_voxwire_test_token"

HUB_TINY = Checkpoint(
    NAME,
    "Whisper tiny.en (Hub)",
    multilingual=False,
    licence="MIT",
    hub=(
        HubSource(
            CT2_REPO,
            CT2_COMMIT,
            (
                HubFile(
                    "model.bin",
                    75_537_502,
                    "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
                ),
                HubFile("config.json", 2_317),
                HubFile("tokenizer.json", 2_128_466),
                HubFile("vocabulary.txt", 422_309),
            ),
        ),
    ),
    # no pinned checksum: the Hub's sha256 of the file is what it is checked against
    ggml={"-q5_0": HubSource(GGML_REPO, GGML_COMMIT, (HubFile("ggml-tiny.en-q5_0.bin"),))},
)


@pytest.fixture
def hub(converted: dict[str, Converted]) -> Iterator[HubServer]:
    """The local Hub, serving tiny.en's checkpoint and a gated ggml repository."""
    server = HubServer(tokens={GGML_REPO: TOKEN})
    bundled = _bundled_dir()
    names = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
    server.add(CT2_REPO, CT2_COMMIT, {n: bundled / n for n in names})
    ggml = converted["tiny.en-q5_0"].path
    server.add(GGML_REPO, GGML_COMMIT, {"ggml-tiny.en-q5_0.bin": ggml})
    with serve(server):
        yield server


@pytest.fixture
def in_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(CHECKPOINTS, NAME, HUB_TINY)
    for name, spec in registry._specs(NAME, HUB_TINY.description, False).items():
        monkeypatch.setitem(registry.KNOWN_MODELS, name, spec)


@pytest.fixture
def env(tmp_path: Path, hub: HubServer, in_catalog: None) -> dict[str, str]:
    """A fresh voxwire cache and Hub cache, HF_ENDPOINT at the local Hub."""
    return {
        "VOXWIRE_CACHE_DIR": str(tmp_path / "voxwire"),
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_TOKEN": "",
        "COLUMNS": "200",
    }


def voxwire(env: dict[str, str], *args: str) -> Result:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        return CliRunner().invoke(app, ["models", "install", *args], env=env)


def text_of(result: Result) -> str:
    return " ".join(result.output.split())


@pytest.mark.timeout(300)
def test_install_from_the_hub_and_transcribe(env: dict[str, str], hub: HubServer) -> None:
    cache = Path(env["VOXWIRE_CACHE_DIR"])
    # whisper.cpp: NAME-q5_0 is a published file, of a gated repository: it needs the token
    ggml_url = f"/{GGML_REPO}/resolve/{GGML_COMMIT}/ggml-tiny.en-q5_0.bin"
    refused = voxwire(env, f"{NAME}-q5_0")
    assert refused.exit_code != 0
    assert "HF_TOKEN" in text_of(refused) and "--token" in text_of(refused)
    published = voxwire(env, f"{NAME}-q5_0", "--token", TOKEN)
    assert published.exit_code == 0, published.output
    assert hub.downloads() == [ggml_url]
    assert all(token == TOKEN for _, path, token in hub.requests if path == ggml_url)
    ggml = cache / "models" / f"ggml-{NAME}-q5_0.bin"
    assert ggml.read_bytes() == hub.repos[GGML_REPO][1]["ggml-tiny.en-q5_0.bin"].path.read_bytes()
    assert validate(ggml).weight_type.name == "Q5_0"

    # faster-whisper: the CTranslate2 checkpoint, at the pinned commit
    done = voxwire(env, NAME, "--engine", "faster-whisper")
    assert done.exit_code == 0, done.output
    folder = cache / "checkpoints" / NAME
    stamp = json.loads((folder / "voxwire.json").read_text())
    assert stamp["source"] == f"hub:{CT2_REPO}" and stamp["revision"] == CT2_COMMIT
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        assert (folder / name).read_bytes() == (_bundled_dir() / name).read_bytes()
    assert len(hub.downloads()) == 5
    snapshot = Path(env["HF_HUB_CACHE"]) / "models--Systran--faster-whisper-tiny.en" / "snapshots"
    assert (snapshot / CT2_COMMIT / "model.bin").is_file()  # in the Hub's cache too

    # whisper.cpp's NAME-q8_0 is converted from that checkpoint: nothing more to download
    converted = voxwire(env, f"{NAME}-q8_0")
    assert converted.exit_code == 0, converted.output
    assert len(hub.downloads()) == 5

    wav = EVAL_DIR / "audio" / f"{JFK_ID}.wav"
    reference = reference_text(JFK_ID)
    for engine, model in (
        ("faster-whisper", folder),
        ("whispercpp", cache / "models" / f"ggml-{NAME}-q8_0.bin"),
        ("whispercpp", ggml),
    ):
        said = transcribe(engine, model, wav, "en")
        assert wer(reference, said) <= 0.10, (engine, model.name, said)


def test_a_damaged_download_is_refused(env: dict[str, str], hub: HubServer) -> None:
    hub.corrupt.add((CT2_REPO, "model.bin"))
    result = voxwire(env, NAME, "--engine", "faster-whisper")
    assert result.exit_code != 0
    said = text_of(result)
    assert "model.bin from Systran/faster-whisper-tiny.en@0d3d19a32d33 does not match" in said
    assert "sha256" in said and "delete" in said
    assert not (Path(env["VOXWIRE_CACHE_DIR"]) / "checkpoints" / NAME).exists()


def test_a_hub_that_contradicts_the_pins_is_refused_before_downloading(
    env: dict[str, str], hub: HubServer
) -> None:
    # the real catalog's small, served with tiny.en's files: the Hub's own
    # description of model.bin does not match the pinned one
    commit = CHECKPOINTS["small"].hub[0].revision
    bundled = _bundled_dir()
    names = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
    hub.add("Systran/faster-whisper-small", commit, {n: bundled / n for n in names})
    result = voxwire(env, "small", "--engine", "faster-whisper")
    assert result.exit_code != 0
    assert "not the pinned file, nothing was downloaded" in text_of(result)
    assert hub.downloads() == []


def test_offline_mode_uses_the_hub_cache(env: dict[str, str], hub: HubServer) -> None:
    assert voxwire(env, NAME, "--engine", "faster-whisper").exit_code == 0
    seen = len(hub.requests)
    again = {**env, "VOXWIRE_CACHE_DIR": env["VOXWIRE_CACHE_DIR"] + "-2", "HF_HUB_OFFLINE": "1"}
    done = voxwire(again, NAME, "--engine", "faster-whisper")
    assert done.exit_code == 0, done.output
    assert len(hub.requests) == seen  # not one request
    folder = Path(again["VOXWIRE_CACHE_DIR"]) / "checkpoints" / NAME
    assert (folder / "model.bin").stat().st_size == 75_537_502

    empty = {
        **again,
        "VOXWIRE_CACHE_DIR": env["VOXWIRE_CACHE_DIR"] + "-3",
        "HF_HUB_CACHE": env["HF_HUB_CACHE"] + "-empty",
    }
    missing = voxwire(empty, NAME, "--engine", "faster-whisper")
    assert missing.exit_code != 0
    said = text_of(missing)
    assert "offline (HF_HUB_OFFLINE)" in said and "not in the local Hub cache" in said
    assert f"voxwire models add FOLDER --name {NAME}" in said
    assert len(hub.requests) == seen


def test_an_unreachable_hub_names_the_manual_route(env: dict[str, str], hub: HubServer) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    result = voxwire({**env, "HF_ENDPOINT": closed}, NAME, "--engine", "faster-whisper")
    assert result.exit_code != 0
    said = text_of(result)
    assert f"cannot reach the Hugging Face Hub at {closed}" in said
    url = f"{closed}/{CT2_REPO}/tree/{CT2_COMMIT}"  # wrapped anywhere in a narrow terminal
    assert url in "".join(result.output.split())
    assert f"voxwire models add FOLDER --name {NAME}" in said
    assert not (Path(env["VOXWIRE_CACHE_DIR"]) / "checkpoints" / NAME).exists()


def test_the_manual_route_checks_the_pins(
    env: dict[str, str], in_catalog: None, tmp_path: Path
) -> None:
    """Files fetched by hand join under the catalog's name, if they are the pinned ones."""
    folder = tmp_path / "by-hand"
    folder.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        (folder / name).write_bytes((_bundled_dir() / name).read_bytes())
    data = bytearray((folder / "model.bin").read_bytes())
    data[-1] ^= 0xFF
    (folder / "model.bin").write_bytes(bytes(data))
    runner = CliRunner()
    refused = runner.invoke(app, ["models", "add", str(folder), "--name", NAME], env=env)
    assert refused.exit_code != 0
    assert "does not match its sha256" in text_of(refused)
    data[-1] ^= 0xFF
    (folder / "model.bin").write_bytes(bytes(data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VOXWIRE_CACHE_DIR", env["VOXWIRE_CACHE_DIR"])
        added = runner.invoke(app, ["models", "add", str(folder), "--name", NAME], env=env)
        assert added.exit_code == 0, added.output
        assert (
            registry.checkpoint_dir(NAME) == Path(env["VOXWIRE_CACHE_DIR"]) / "checkpoints" / NAME
        )
        assert registry.is_installed(NAME)
