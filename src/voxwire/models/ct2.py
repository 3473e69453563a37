"""Read a CTranslate2 checkpoint: ``model.bin``, ``config.json``, ``vocabulary.*``.

``model.bin`` is little-endian binary (CTranslate2 binary versions 4 to 6)::

    u32 version
    str spec_name, u32 revision            (str = u16 length incl. NUL, bytes, NUL)
    u32 n_variables, then per variable:
        str name, u8 rank, u32 dims[rank], u8 dtype, u32 n_bytes, bytes data
    u32 n_aliases, then per alias: str alias, str target

Scalars (``encoder/num_heads``...) are rank-0 variables. The file is read once
into memory and every array is a read-only view on it. Errors are raised as
:class:`voxwire.core.errors.ModelConversionError`.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxwire.core.errors import ModelConversionError

SUPPORTED_VERSIONS = range(4, 7)

# CTranslate2's DataType enum, in order.
_DTYPES: dict[int, np.dtype[Any]] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
}
_BFLOAT16 = 5


@dataclass(frozen=True, slots=True)
class Ct2Variable:
    """One named array of the checkpoint."""

    name: str
    data: npt.NDArray[Any]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype


@dataclass(frozen=True, slots=True)
class Ct2Model:
    """The content of a ``model.bin`` file."""

    version: int
    spec_name: str
    revision: int
    variables: dict[str, Ct2Variable]
    aliases: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> npt.NDArray[Any]:
        """Return the array called ``name``, following aliases."""
        target = self.aliases.get(name, name)
        try:
            return self.variables[target].data
        except KeyError:
            raise ModelConversionError(
                f"CTranslate2 checkpoint has no variable {name!r}",
                hint=f"is this a Whisper checkpoint? spec is {self.spec_name!r}",
            ) from None

    def scalar(self, name: str) -> int:
        """Return an integer scalar such as ``encoder/num_heads``."""
        value = self.get(name)
        if value.size != 1:
            raise ModelConversionError(f"CTranslate2 variable {name!r} is not a scalar")
        return int(value.reshape(()).item())


@dataclass(frozen=True, slots=True)
class Ct2Checkpoint:
    """A checkpoint directory: weights, configuration and vocabulary."""

    path: Path
    model: Ct2Model
    config: dict[str, Any]
    vocabulary: list[str]


class _Reader:
    """A bounds-checked cursor over the bytes of ``model.bin``."""

    def __init__(self, buffer: bytes, source: Path) -> None:
        self.buffer = buffer
        self.pos = 0
        self.source = source

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buffer):
            raise ModelConversionError(
                f"{self.source} is truncated or corrupt (read of {n} bytes at offset "
                f"{self.pos}, file has {len(self.buffer)})",
                hint="reinstall the package that ships the checkpoint",
            )
        view = memoryview(self.buffer)[self.pos : self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def u8(self) -> int:
        return int(self.unpack("B")[0])

    def u32(self) -> int:
        return int(self.unpack("I")[0])

    def string(self) -> str:
        (length,) = self.unpack("H")
        raw = bytes(self.take(int(length)))
        if not raw.endswith(b"\0"):
            raise ModelConversionError(f"{self.source}: malformed string at offset {self.pos}")
        return raw[:-1].decode("utf-8")


def _read_variable(reader: _Reader) -> Ct2Variable:
    name = reader.string()
    rank = reader.u8()
    shape = tuple(reader.u32() for _ in range(rank))
    dtype_id = reader.u8()
    n_bytes = reader.u32()
    data = reader.take(n_bytes)
    if dtype_id == _BFLOAT16:
        raise ModelConversionError(f"{name}: bfloat16 checkpoints are not supported")
    dtype = _DTYPES.get(dtype_id)
    if dtype is None:
        raise ModelConversionError(f"{name}: unknown CTranslate2 dtype {dtype_id}")
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.itemsize != n_bytes:
        raise ModelConversionError(
            f"{name}: shape {shape} of {dtype} does not match its {n_bytes} bytes"
        )
    array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
    return Ct2Variable(name=name, data=array)


def read_model_bin(path: Path) -> Ct2Model:
    """Parse a CTranslate2 ``model.bin`` file."""
    try:
        buffer = path.read_bytes()
    except OSError as exc:
        raise ModelConversionError(f"cannot read {path}: {exc.strerror}") from exc
    reader = _Reader(buffer, path)
    version = reader.u32()
    if version not in SUPPORTED_VERSIONS:
        raise ModelConversionError(
            f"{path}: CTranslate2 binary version {version} is not supported "
            f"(supported: {SUPPORTED_VERSIONS.start}-{SUPPORTED_VERSIONS.stop - 1})"
        )
    spec_name = reader.string()
    revision = reader.u32()
    variables: dict[str, Ct2Variable] = {}
    for _ in range(reader.u32()):
        variable = _read_variable(reader)
        variables[variable.name] = variable
    aliases: dict[str, str] = {}
    for _ in range(reader.u32()):
        alias = reader.string()
        aliases[alias] = reader.string()
    return Ct2Model(version, spec_name, revision, variables, aliases)


def read_vocabulary(directory: Path) -> list[str]:
    """Read ``vocabulary.json`` (a JSON list) or ``vocabulary.txt`` (one token a line)."""
    json_path = directory / "vocabulary.json"
    if json_path.exists():
        tokens = json.loads(json_path.read_text(encoding="utf-8"))
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ModelConversionError(f"{json_path} is not a list of strings")
        return tokens
    txt_path = directory / "vocabulary.txt"
    try:
        text = txt_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelConversionError(
            f"cannot read the vocabulary {txt_path}: {exc.strerror}"
        ) from exc
    # Split on "\n" only: str.splitlines would also split on U+0085 and friends,
    # which are legitimate byte-level BPE characters.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_checkpoint(directory: Path) -> Ct2Checkpoint:
    """Load a CTranslate2 checkpoint directory."""
    if not (directory / "model.bin").is_file():
        raise ModelConversionError(f"{directory} has no model.bin: not a CTranslate2 checkpoint")
    config_path = directory / "config.json"
    config: dict[str, Any] = {}
    if config_path.exists():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelConversionError(f"cannot read {config_path}: {exc}") from exc
    return Ct2Checkpoint(
        path=directory,
        model=read_model_bin(directory / "model.bin"),
        config=config,
        vocabulary=read_vocabulary(directory),
    )
