"""The whisper.cpp ggml model file: layout, expected tensors, reading and checking.

A whisper.cpp model file (little-endian, as written by whisper.cpp's own
``convert-pt-to-ggml.py`` and read by ``whisper_model_load``)::

    i32 magic 0x67676d6c ("ggml")
    i32 n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
        n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
    i32 n_mel, n_fft, f32 filters[n_mel * n_fft]          mel filterbank
    i32 n_tokens, then per token: i32 length, bytes        vocabulary
    per tensor, until end of file:
        i32 n_dims, i32 name_length, i32 type, i32 ne[n_dims] (innermost first),
        bytes name, bytes data

``ftype`` is a ``ggml_ftype`` plus ``1000 * GGML_QNT_VERSION`` for quantized
files (q8_0: ``2000 + 7``). The loader derives each tensor's type from it:
2-D weights take the file type, convolution kernels f16, everything else f32.
:func:`expected_tensors` mirrors that table; the converter writes from it and
:func:`inspect` checks a file against it, so a file that passes cannot make
whisper.cpp fail to load or crash on shapes, types or truncation.

This module is pure: no whisper.cpp, no global state. Errors are
:class:`voxwire.core.errors.ModelError`.
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass
from enum import IntEnum
from pathlib import Path
from typing import BinaryIO, Literal

from voxwire.core.errors import ModelError

MAGIC = 0x67676D6C
QNT_VERSION = 2
QNT_VERSION_FACTOR = 1000

_MAX_DIM = 1 << 24
_MAX_NAME = 256
_MAX_TOKEN = 1024
_HINT = "run `voxwire models install` to rebuild it, or pass a whisper.cpp ggml model file"


class GgmlType(IntEnum):
    """``enum ggml_type``: the type of one tensor."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    BF16 = 30


# (elements per block, bytes per block), from ggml's type traits.
TYPE_LAYOUT: dict[GgmlType, tuple[int, int]] = {
    GgmlType.F32: (1, 4),
    GgmlType.F16: (1, 2),
    GgmlType.Q4_0: (32, 18),
    GgmlType.Q4_1: (32, 20),
    GgmlType.Q5_0: (32, 22),
    GgmlType.Q5_1: (32, 24),
    GgmlType.Q8_0: (32, 34),
    GgmlType.Q2_K: (256, 84),
    GgmlType.Q3_K: (256, 110),
    GgmlType.Q4_K: (256, 144),
    GgmlType.Q5_K: (256, 176),
    GgmlType.Q6_K: (256, 210),
    GgmlType.BF16: (1, 2),
}

# ``enum ggml_ftype`` (the header's file type) -> the type of 2-D weights.
FTYPE_WEIGHT_TYPE: dict[int, GgmlType] = {
    0: GgmlType.F32,
    1: GgmlType.F16,
    2: GgmlType.Q4_0,
    3: GgmlType.Q4_1,
    4: GgmlType.Q4_1,
    7: GgmlType.Q8_0,
    8: GgmlType.Q5_0,
    9: GgmlType.Q5_1,
    10: GgmlType.Q2_K,
    11: GgmlType.Q3_K,
    12: GgmlType.Q4_K,
    13: GgmlType.Q5_K,
    14: GgmlType.Q6_K,
    24: GgmlType.BF16,
}

FTYPE_F16 = 1


def file_ftype(weight_type: GgmlType) -> int:
    """The header ``ftype`` of a file whose 2-D weights have ``weight_type``."""
    if weight_type == GgmlType.F16:
        return FTYPE_F16
    for ftype, wtype in FTYPE_WEIGHT_TYPE.items():
        if wtype == weight_type and ftype > FTYPE_F16:
            return ftype + QNT_VERSION * QNT_VERSION_FACTOR
    raise ModelError(f"no ggml file type stores weights as {weight_type.name}")


def tensor_nbytes(ggml_type: GgmlType, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of ``shape`` (numpy order: rows last-but-one, row length last)."""
    block, size = TYPE_LAYOUT[ggml_type]
    n = 1
    for dim in shape:
        n *= dim
    if shape and shape[-1] % block:
        raise ModelError(f"row length {shape[-1]} is not a multiple of the {ggml_type.name} block")
    return n // block * size


@dataclass(frozen=True, slots=True)
class Hparams:
    """The eleven header integers, in file order."""

    n_vocab: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_mels: int
    ftype: int

    def pack(self) -> bytes:
        return struct.pack("<12i", MAGIC, *astuple(self))

    @property
    def weight_type(self) -> GgmlType:
        """The type of 2-D weights this file type implies."""
        base = self.ftype % QNT_VERSION_FACTOR
        try:
            return FTYPE_WEIGHT_TYPE[base]
        except KeyError:
            raise ModelError(f"unknown ggml file type {self.ftype}", hint=_HINT) from None

    @property
    def conv_type(self) -> GgmlType:
        return GgmlType.F32 if self.weight_type == GgmlType.F32 else GgmlType.F16


Role = Literal["weight", "conv", "f32"]


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A tensor whisper.cpp expects: shape in numpy order and its role."""

    shape: tuple[int, ...]
    role: Role

    def ggml_type(self, hparams: Hparams) -> GgmlType:
        if self.role == "weight":
            return hparams.weight_type
        if self.role == "conv":
            return hparams.conv_type
        return GgmlType.F32


def _linear(prefix: str, n_out: int, n_in: int, *, bias: bool = True) -> dict[str, TensorSpec]:
    specs = {f"{prefix}.weight": TensorSpec((n_out, n_in), "weight")}
    if bias:
        specs[f"{prefix}.bias"] = TensorSpec((n_out,), "f32")
    return specs


def _norm(prefix: str, n: int) -> dict[str, TensorSpec]:
    return {f"{prefix}.weight": TensorSpec((n,), "f32"), f"{prefix}.bias": TensorSpec((n,), "f32")}


def _attention(prefix: str, n: int) -> dict[str, TensorSpec]:
    return {
        **_linear(f"{prefix}.query", n, n),
        **_linear(f"{prefix}.key", n, n, bias=False),
        **_linear(f"{prefix}.value", n, n),
        **_linear(f"{prefix}.out", n, n),
    }


def _block(prefix: str, n: int, *, cross: bool) -> dict[str, TensorSpec]:
    specs = {
        **_norm(f"{prefix}.mlp_ln", n),
        **_linear(f"{prefix}.mlp.0", 4 * n, n),
        **_linear(f"{prefix}.mlp.2", n, 4 * n),
        **_norm(f"{prefix}.attn_ln", n),
        **_attention(f"{prefix}.attn", n),
    }
    if cross:
        specs.update(_norm(f"{prefix}.cross_attn_ln", n))
        specs.update(_attention(f"{prefix}.cross_attn", n))
    return specs


def expected_tensors(hp: Hparams) -> dict[str, TensorSpec]:
    """Every tensor whisper.cpp's loader creates for ``hp``, in a stable order."""
    a, t = hp.n_audio_state, hp.n_text_state
    specs: dict[str, TensorSpec] = {
        "encoder.positional_embedding": TensorSpec((hp.n_audio_ctx, a), "f32"),
        "encoder.conv1.weight": TensorSpec((a, hp.n_mels, 3), "conv"),
        "encoder.conv1.bias": TensorSpec((a, 1), "f32"),
        "encoder.conv2.weight": TensorSpec((a, a, 3), "conv"),
        "encoder.conv2.bias": TensorSpec((a, 1), "f32"),
        **_norm("encoder.ln_post", a),
    }
    for i in range(hp.n_audio_layer):
        specs.update(_block(f"encoder.blocks.{i}", a, cross=False))
    specs["decoder.positional_embedding"] = TensorSpec((hp.n_text_ctx, t), "f32")
    specs["decoder.token_embedding.weight"] = TensorSpec((hp.n_vocab, t), "weight")
    specs.update(_norm("decoder.ln", t))
    for i in range(hp.n_text_layer):
        specs.update(_block(f"decoder.blocks.{i}", t, cross=True))
    return specs


def tensor_header(name: str, ggml_type: GgmlType, shape: tuple[int, ...]) -> bytes:
    """The header written before a tensor's data (dimensions innermost first)."""
    raw = name.encode("utf-8")
    return (
        struct.pack(f"<3i{len(shape)}i", len(shape), len(raw), int(ggml_type), *shape[::-1]) + raw
    )


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """A tensor as found in a file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: GgmlType
    offset: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class GgmlFile:
    """What :func:`inspect` found in a file that whisper.cpp can load."""

    path: Path
    size: int
    hparams: Hparams
    n_mel_filters: int
    n_fft_bins: int
    n_tokens: int
    tensors: tuple[TensorInfo, ...]

    @property
    def weight_type(self) -> GgmlType:
        return self.hparams.weight_type


class _Cursor:
    """Bounds-checked reads that turn a short file into a clear :class:`ModelError`."""

    def __init__(self, stream: BinaryIO, path: Path, size: int) -> None:
        self.stream = stream
        self.path = path
        self.size = size

    @property
    def pos(self) -> int:
        return self.stream.tell()

    def truncated(self, what: str, need: int) -> ModelError:
        return ModelError(
            f"model file {self.path} is truncated: {what} needs {need} bytes at offset "
            f"{self.pos}, the file has {self.size} bytes",
            hint=_HINT,
        )

    def read(self, n: int, what: str) -> bytes:
        if self.pos + n > self.size:
            raise self.truncated(what, n)
        return self.stream.read(n)

    def ints(self, count: int, what: str) -> tuple[int, ...]:
        return struct.unpack(f"<{count}i", self.read(4 * count, what))

    def skip(self, n: int, what: str) -> None:
        if self.pos + n > self.size:
            raise self.truncated(what, n)
        self.stream.seek(n, 1)


def _corrupt(path: Path, detail: str) -> ModelError:
    return ModelError(f"model file {path} is corrupt: {detail}", hint=_HINT)


def _read_hparams(cur: _Cursor) -> Hparams:
    if cur.size < 4 or cur.ints(1, "the magic number")[0] != MAGIC:
        raise ModelError(
            f"{cur.path} is not a whisper.cpp ggml model (bad magic number)",
            hint="pass a ggml model file, or a model name such as tiny.en",
        )
    hp = Hparams(*cur.ints(11, "the header"))
    values = astuple(hp)[:-1]
    if any(v <= 0 or v > _MAX_DIM for v in values):
        raise _corrupt(cur.path, f"implausible header values {values}")
    if hp.n_audio_state % hp.n_audio_head or hp.n_text_state % hp.n_text_head:
        raise _corrupt(cur.path, "state size is not a multiple of the head count")
    if hp.ftype % QNT_VERSION_FACTOR not in FTYPE_WEIGHT_TYPE:
        raise _corrupt(cur.path, f"unknown ggml file type {hp.ftype}")
    if hp.weight_type == GgmlType.F32:
        raise ModelError(
            f"model file {cur.path} stores all weights as f32; whisper.cpp crashes on its "
            "convolutions",
            hint="convert to f16 or a quantized type",
        )
    return hp


def _read_mel_and_vocab(cur: _Cursor, hp: Hparams) -> tuple[int, int, int]:
    n_mel, n_fft = cur.ints(2, "the mel filter header")
    if n_mel != hp.n_mels or not 0 < n_fft <= _MAX_DIM:
        raise _corrupt(
            cur.path, f"mel filters are {n_mel}x{n_fft}, the header says {hp.n_mels} mels"
        )
    cur.skip(4 * n_mel * n_fft, "the mel filters")
    (n_tokens,) = cur.ints(1, "the vocabulary size")
    if not 0 < n_tokens <= hp.n_vocab:
        raise _corrupt(cur.path, f"{n_tokens} vocabulary entries for n_vocab {hp.n_vocab}")
    for index in range(n_tokens):
        (length,) = cur.ints(1, f"token {index}")
        if not 0 <= length <= _MAX_TOKEN:
            raise _corrupt(cur.path, f"token {index} has length {length}")
        cur.skip(length, f"token {index}")
    return n_mel, n_fft, n_tokens


def _read_tensor(cur: _Cursor) -> TensorInfo:
    n_dims, name_len, type_id = cur.ints(3, "a tensor header")
    if not 1 <= n_dims <= 3 or not 0 < name_len <= _MAX_NAME:
        raise _corrupt(cur.path, f"bad tensor header at offset {cur.pos - 12}")
    shape = cur.ints(n_dims, "a tensor shape")[::-1]
    try:
        name = cur.read(name_len, "a tensor name").decode("utf-8")
        ggml_type = GgmlType(type_id)
    except (UnicodeDecodeError, ValueError):
        raise _corrupt(cur.path, f"bad tensor name or type {type_id} at offset {cur.pos}") from None
    if any(not 0 < d <= _MAX_DIM for d in shape):
        raise _corrupt(cur.path, f"tensor {name!r} has shape {shape}")
    if shape[-1] % TYPE_LAYOUT[ggml_type][0]:
        raise _corrupt(cur.path, f"tensor {name!r} rows do not fill whole {ggml_type.name} blocks")
    offset = cur.pos
    nbytes = tensor_nbytes(ggml_type, shape)
    cur.skip(nbytes, f"the data of tensor {name!r}")
    return TensorInfo(name, shape, ggml_type, offset, nbytes)


def _check_tensors(path: Path, hp: Hparams, tensors: list[TensorInfo]) -> None:
    expected = expected_tensors(hp)
    seen: set[str] = set()
    for tensor in tensors:
        spec = expected.get(tensor.name)
        if spec is None:
            raise _corrupt(path, f"unknown tensor {tensor.name!r}")
        if tensor.name in seen:
            raise _corrupt(path, f"tensor {tensor.name!r} appears twice")
        seen.add(tensor.name)
        want_type = spec.ggml_type(hp)
        if tensor.shape != spec.shape or tensor.ggml_type != want_type:
            raise _corrupt(
                path,
                f"tensor {tensor.name!r} is {tensor.ggml_type.name}{list(tensor.shape)}, "
                f"whisper.cpp expects {want_type.name}{list(spec.shape)}",
            )
    missing = [name for name in expected if name not in seen]
    if missing:
        raise ModelError(
            f"model file {path} is incomplete: {len(missing)} of {len(expected)} tensors are "
            f"missing, first {missing[0]!r}",
            hint=_HINT,
        )


def inspect(path: Path) -> GgmlFile:
    """Parse and check every header of a whisper.cpp model file.

    Reads headers only (tensor data is skipped), so it is cheap. Raises
    :class:`ModelError` if the file is missing, not ggml, corrupt or truncated.
    """
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        raise ModelError(f"model file {path} does not exist", hint=_HINT) from None
    except OSError as exc:
        raise ModelError(f"cannot open model file {path}: {exc.strerror}") from exc
    with stream:
        size = path.stat().st_size
        cur = _Cursor(stream, path, size)
        hp = _read_hparams(cur)
        n_mel, n_fft, n_tokens = _read_mel_and_vocab(cur, hp)
        tensors: list[TensorInfo] = []
        while cur.pos < size:
            tensors.append(_read_tensor(cur))
    _check_tensors(path, hp, tensors)
    return GgmlFile(path, size, hp, n_mel, n_fft, n_tokens, tuple(tensors))
