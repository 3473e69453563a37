"""CTranslate2 -> whisper.cpp conversion, the model cache, and model-file validation."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tests.models.conftest import EVAL_DIR, JFK_ID, Converted, reference_text, run_isolated, wer
from voxwire.core.errors import ModelConversionError, ModelError
from voxwire.models import installed, is_installed, model_path, resolve, validate
from voxwire.models.convert import convert, decode_vocabulary, mel_filters, quantize
from voxwire.models.ggml import GgmlType, tensor_header

TRANSCRIBE_WITH_PYWHISPERCPP = """
import json, sys, time, wave
import numpy as np
from pywhispercpp.model import Model
model_file, wav_file = sys.argv[1:3]
with wave.open(wav_file, "rb") as wav:
    pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
model = Model(model_file, redirect_whispercpp_logs_to=None, n_threads=2, print_progress=False)
started = time.perf_counter()
segments = model.transcribe(pcm.astype(np.float32) / 32768)
elapsed = time.perf_counter() - started
print(json.dumps({"text": " ".join(s.text for s in segments), "seconds": elapsed}))
"""


@pytest.mark.timeout(120)
def test_conversion_is_quick_and_sizes_are_as_expected(converted: dict[str, Converted]) -> None:
    f16, q8, q5 = converted["tiny.en"], converted["tiny.en-q8_0"], converted["tiny.en-q5_0"]
    assert f16.seconds < 10, "first use must not keep the user waiting"
    assert q8.seconds < 10 and q5.seconds < 10
    # whisper.cpp's own ggml-tiny.en.bin is 77.7 MB; 8-bit weights take a bit over half,
    # 5-bit ones (22 bytes per 32 weights) about a third.
    assert 75e6 < f16.path.stat().st_size < 80e6
    assert 0.5 < q8.path.stat().st_size / f16.path.stat().st_size < 0.6
    assert 0.3 < q5.path.stat().st_size / f16.path.stat().st_size < 0.4
    assert not list(f16.path.parent.glob(".*.part")), "no temporary files left behind"


@pytest.mark.timeout(60)
def test_converted_files_have_the_layout_whisper_cpp_expects(
    converted: dict[str, Converted],
) -> None:
    f16 = validate(converted["tiny.en"].path)
    q8 = validate(converted["tiny.en-q8_0"].path)
    q5 = validate(converted["tiny.en-q5_0"].path)
    hp = f16.hparams
    assert (hp.n_vocab, hp.n_audio_ctx, hp.n_audio_state, hp.n_audio_head) == (51864, 1500, 384, 6)
    assert (hp.n_audio_layer, hp.n_text_ctx, hp.n_text_layer, hp.n_mels) == (4, 448, 4, 80)
    assert (hp.ftype, q8.hparams.ftype, q5.hparams.ftype) == (1, 2007, 2008)
    assert (f16.n_mel_filters, f16.n_fft_bins) == (80, 201)
    assert f16.n_tokens == 50256  # the text tokens, below <|endoftext|>
    types = {t.name: t.ggml_type for t in q8.tensors}
    assert len(types) == 167
    assert types["decoder.token_embedding.weight"] == GgmlType.Q8_0
    assert types["encoder.blocks.0.attn.query.weight"] == GgmlType.Q8_0
    assert types["encoder.conv1.weight"] == GgmlType.F16
    assert types["encoder.conv1.bias"] == types["encoder.positional_embedding"] == GgmlType.F32
    assert "encoder.blocks.0.attn.key.bias" not in types
    q5_types = {t.name: t.ggml_type for t in q5.tensors}
    assert q5_types == {n: GgmlType.Q5_0 if t == GgmlType.Q8_0 else t for n, t in types.items()}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["tiny.en", "tiny.en-q8_0", "tiny.en-q5_0"])
def test_converted_model_transcribes_jfk_in_pywhispercpp(
    converted: dict[str, Converted], name: str
) -> None:
    wav = EVAL_DIR / "audio" / f"{JFK_ID}.wav"
    run = run_isolated(TRANSCRIBE_WITH_PYWHISPERCPP, str(converted[name].path), str(wav))
    assert not run.timed_out
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert wer(reference_text(JFK_ID), result["text"]) <= 0.10, result["text"]


def test_mel_filters_match_whisper() -> None:
    filters = mel_filters(80)
    assert filters.shape == (80, 201)
    assert filters.dtype == np.float32
    assert (filters >= 0).all()
    # Value from Whisper's mel_filters.npz (librosa, Slaney scale and norm).
    assert filters[0, 1] == pytest.approx(0.02486259, rel=1e-5)
    peaks = filters.argmax(axis=1)
    assert (np.diff(peaks) >= 0).all()
    assert peaks[-1] > 150


def test_vocabulary_is_byte_decoded_up_to_end_of_text() -> None:
    tokens = ["!", "Ġthe", "Ċ", "Ã©", "<|endoftext|>", "<|startoftranscript|>"]
    assert decode_vocabulary(tokens) == [b"!", b" the", b"\n", "é".encode()]
    with pytest.raises(ModelConversionError, match="endoftext"):
        decode_vocabulary(["a", "b"])


def test_q8_0_quantization_round_trips() -> None:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((4, 64)).astype(np.float32)
    raw = quantize(weights, GgmlType.Q8_0)
    assert len(raw) == 4 * 2 * 34
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", 32)])
    restored = (blocks["d"].astype(np.float32)[:, None] * blocks["q"]).reshape(4, 64)
    scales = np.repeat(blocks["d"].astype(np.float32), 32).reshape(4, 64)
    assert (np.abs(restored - weights) <= scales * 0.51 + 1e-6).all()


def test_q5_0_quantization_round_trips() -> None:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((4, 64)).astype(np.float32)
    raw = quantize(weights, GgmlType.Q5_0)
    assert len(raw) == 4 * 2 * 22
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    # element j < 16: low nibble of qs[j], bit j of qh; element j + 16: high nibble, bit j + 16
    low = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.int32)
    high = (blocks["qh"][:, None] >> np.arange(32, dtype=np.uint32)) & 1
    q = low | (high.astype(np.int32) << 4)
    d = blocks["d"].astype(np.float32)[:, None]
    restored = (d * (q - 16)).reshape(4, 64)
    assert (
        np.abs(restored - weights) <= np.abs(np.repeat(d, 32, axis=1)).reshape(4, 64) * 0.51 + 1e-6
    ).all()


# --- the cache ---------------------------------------------------------------


@pytest.mark.timeout(60)
def test_installed_lists_every_model(use_cache: Path, converted: dict[str, Converted]) -> None:
    infos = {info.name: info for info in installed()}
    assert {n: i.ftype for n, i in infos.items()} == {
        "tiny.en": "f16",
        "tiny.en-q8_0": "q8_0",
        "tiny.en-q5_0": "q5_0",
    }
    for name, info in infos.items():
        assert info.path == converted[name].path
        assert info.error is None
        assert info.size == info.path.stat().st_size


@pytest.mark.timeout(60)
def test_resolve_reuses_the_cache_and_accepts_paths(use_cache: Path) -> None:
    path = model_path("tiny.en")
    before = path.stat().st_mtime_ns
    assert resolve("tiny.en") == path
    assert path.stat().st_mtime_ns == before, "a valid cached model is not rebuilt"
    assert resolve(str(path)) == path
    assert resolve(path) == path
    with pytest.raises(ModelError, match="neither a known name nor an existing file") as err:
        resolve("tiny.fr")
    assert err.value.hint
    assert "tiny.en" in err.value.hint


@pytest.mark.timeout(120)
def test_damaged_cache_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXWIRE_CACHE_DIR", str(tmp_path))
    assert not is_installed("tiny.en-q8_0")
    fractions: list[float] = []
    from voxwire.models import install

    path = install("tiny.en-q8_0", progress=lambda _stage, done: fractions.append(done))
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    path.write_bytes(path.read_bytes()[:1000])
    assert not is_installed("tiny.en-q8_0")
    [info] = installed()
    assert info.ftype == "invalid"
    assert info.error
    assert "truncated" in info.error
    assert resolve("tiny.en-q8_0") == path
    assert is_installed("tiny.en-q8_0")


def test_failed_conversion_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "models" / "ggml-x.bin"
    with pytest.raises(ModelConversionError, match="not a CTranslate2 checkpoint"):
        convert(tmp_path / "no-checkpoint", out)
    assert not out.parent.exists() or not list(out.parent.iterdir())


# --- validation of damaged and foreign files ----------------------------------


def _patched(source: Path, dest: Path, offset: int, value: bytes) -> Path:
    data = bytearray(source.read_bytes())
    data[offset : offset + len(value)] = value
    dest.write_bytes(bytes(data))
    return dest


def _header_field(index: int) -> int:
    """Byte offset of header integer ``index`` (0 = n_vocab ... 10 = ftype)."""
    return 4 + 4 * index


def _damaged_files(f16: Path, tmp: Path) -> dict[str, tuple[Path, str]]:
    """Damaged copies of ``f16`` and the message each must produce."""
    data = f16.read_bytes()
    tensors = validate(f16).tensors
    last = tensors[-1]
    last_header = len(tensor_header(last.name, last.ggml_type, last.shape))
    weight = next(t for t in reversed(tensors) if t.ggml_type == GgmlType.F16)
    weight_type_at = weight.offset - len(weight.name) - 4 * len(weight.shape) - 4
    cases: dict[str, tuple[bytes, str]] = {
        "cut-in-header": (data[:30], "truncated"),
        "cut-in-mel": (data[:20_000], "truncated"),
        "cut-in-vocab": (data[:300_000], "truncated"),
        "cut-in-tensor": (data[: len(data) // 2], "truncated"),
        "last-byte-missing": (data[:-1], "truncated"),
        "last-tensor-missing": (data[: last.offset - last_header], "1 of 167 tensors are missing"),
        "empty": (b"", "not a whisper.cpp ggml model"),
        "wav": ((EVAL_DIR / "audio" / f"{JFK_ID}.wav").read_bytes(), "not a whisper.cpp ggml"),
        "text": (b"hello, I am not a model\n" * 10, "not a whisper.cpp ggml model"),
    }
    files = {}
    for name, (content, message) in cases.items():
        path = tmp / f"{name}.bin"
        path.write_bytes(content)
        files[name] = (path, message)
    patches = {
        "negative-vocab": (_header_field(0), struct.pack("<i", -5), "implausible header"),
        "unknown-ftype": (_header_field(10), struct.pack("<i", 12345), "unknown ggml file type"),
        "all-f32": (_header_field(10), struct.pack("<i", 0), "crashes"),
        "wrong-mels": (_header_field(9), struct.pack("<i", 81), "mel filters are 80x201"),
        "more-layers": (_header_field(4), struct.pack("<i", 99), "tensors are missing"),
        "wrong-tensor-type": (weight_type_at, struct.pack("<i", GgmlType.BF16), "is BF16"),
    }
    for name, (offset, value, message) in patches.items():
        files[name] = (_patched(f16, tmp / f"{name}.bin", offset, value), message)
    return files


@pytest.mark.timeout(120)
def test_validate_rejects_damaged_and_foreign_files(
    converted: dict[str, Converted], tmp_path: Path
) -> None:
    for name, (path, message) in _damaged_files(converted["tiny.en"].path, tmp_path).items():
        with pytest.raises(ModelError) as err:  # noqa: PT012 - one check per damaged file
            validate(path)
            pytest.fail(f"{name} passed validation")
        assert message in err.value.message, f"{name}: {err.value.message}"
        assert str(path) in err.value.message, name
        assert err.value.hint, name


def test_validate_reports_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist") as err:
        validate(tmp_path / "nope.bin")
    assert err.value.hint
    assert "voxwire models install" in err.value.hint
    with pytest.raises(ModelError, match="is a directory"):
        resolve(tmp_path)
