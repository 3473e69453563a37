"""Read the tensors of a PyTorch checkpoint, without torch.

Two formats:

- **zip** (``torch.save`` since PyTorch 1.6): a zip archive whose
  ``<name>/data.pkl`` is the object's pickle and ``<name>/data/<key>`` the raw
  little-endian elements of each storage;
- **legacy** (before 1.6): one file of consecutive pickles
(``_legacy_save`` in ``torch/serialization.py``): a magic number, the protocol
version (1001), a dict about the writing machine, the object itself, then the
list of storage keys in the order their data follows; each storage's data is
an int64 element count followed by the raw little-endian elements.

In the object's pickle a tensor is a call of ``torch._utils._rebuild_tensor_v2``
(storage, offset, size, stride, ...) whose storage is a persistent id
``("storage", <type>, <key>, <location>, <numel>[, <view>])``. The
:class:`_Unpickler` here maps those calls to placeholders and only the classes
listed in :data:`_ALLOWED` can be named at all (no code of the file runs); once
the storages are read, the placeholders become numpy arrays. A checkpoint may
also hold objects of its training library beside the tensors (pyannote's task
specifications, the torch version): those listed in :data:`_INERT` become
:class:`_Inert` placeholders that keep nothing.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from voxwire.core.errors import ModelError

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


@dataclass(frozen=True, slots=True)
class _StorageType:
    name: str


@dataclass(slots=True)
class _Storage:
    dtype: np.dtype[Any]
    numel: int
    data: npt.NDArray[Any] | None = None


@dataclass(frozen=True, slots=True)
class _TensorRef:
    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def array(self) -> npt.NDArray[Any]:
        data = self.storage.data
        if data is None:
            raise ModelError("a tensor's storage is missing from the checkpoint")
        if not self.size:
            return data[self.offset : self.offset + 1].reshape(()).copy()
        itemsize = data.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(
            data[self.offset :],
            shape=self.size,
            strides=tuple(s * itemsize for s in self.stride),
            writeable=False,
        )
        return np.array(view)  # a copy that owns its data


def _rebuild_tensor(
    storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...], *_: object
) -> _TensorRef:
    return _TensorRef(storage, offset, tuple(size), tuple(stride))


def _rebuild_parameter(data: _TensorRef, *_: object) -> _TensorRef:
    return data


class _Inert:
    """Stands in for an object of a training library; built from anything, keeps nothing."""

    def __init__(self, *_: object, **__: object) -> None:
        pass

    def __setstate__(self, _: object) -> None:
        pass


_INERT = {
    ("pyannote.audio.core.task", "Specifications"),
    ("pyannote.audio.core.task", "Problem"),
    ("pyannote.audio.core.task", "Resolution"),
    ("torch.torch_version", "TorchVersion"),
}

_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(name) for name in _STORAGE_DTYPES},
    **{name: _Inert for name in _INERT},
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], storages: dict[str, _Storage]) -> None:
        super().__init__(file)
        self._storages = storages

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise ModelError(f"the checkpoint names {module}.{name}, which is not read") from None

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            raise ModelError(f"unknown persistent id in the checkpoint: {pid!r:.60}")
        _, kind, key, _location, numel, *view = pid
        if view and view[0] is not None:
            raise ModelError("storage views are not supported")
        if not isinstance(kind, _StorageType):
            raise ModelError(f"unknown storage type {kind!r:.60}")
        if key not in self._storages:
            dtype = np.dtype(_STORAGE_DTYPES[kind.name]).newbyteorder("<")
            self._storages[key] = _Storage(dtype, int(numel))
        return self._storages[key]


def _tensors(obj: Any, prefix: str = "") -> dict[str, npt.NDArray[Any]]:
    """Every tensor inside nested dicts, by dotted key."""
    if isinstance(obj, _TensorRef):
        return {prefix: obj.array()}
    if isinstance(obj, dict):
        found: dict[str, npt.NDArray[Any]] = {}
        for key, value in obj.items():
            found.update(_tensors(value, f"{prefix}.{key}" if prefix else str(key)))
        return found
    return {}


def load_tensors(data: bytes) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a ``torch.save`` file, zip or legacy, by dotted key
    (``model_state.lstm...``). Raises :class:`ModelError` for anything else."""
    if data[:4] == b"PK\x03\x04":
        return _load_zip(data)
    return _load_legacy(data)


def _load_zip(data: bytes) -> dict[str, npt.NDArray[Any]]:
    storages: dict[str, _Storage] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise ModelError("not a PyTorch checkpoint (no single data.pkl in the zip)")
            root = pickles[0].removesuffix("data.pkl")
            obj = _Unpickler(io.BytesIO(archive.read(pickles[0])), storages).load()
            for key, storage in storages.items():
                raw = archive.read(f"{root}data/{key}")
                if len(raw) != storage.numel * storage.dtype.itemsize:
                    raise ModelError(f"storage {key} is truncated or its size is wrong")
                storage.data = np.frombuffer(raw, dtype=storage.dtype)
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, KeyError) as exc:
        raise ModelError(f"cannot read the PyTorch checkpoint: {exc}") from exc
    return _tensors(obj)


def _load_legacy(data: bytes) -> dict[str, npt.NDArray[Any]]:
    stream = io.BytesIO(data)
    storages: dict[str, _Storage] = {}
    try:
        if _Unpickler(stream, storages).load() != MAGIC_NUMBER:
            raise ModelError("not a legacy PyTorch checkpoint (no magic number)")
        if _Unpickler(stream, storages).load() != PROTOCOL_VERSION:
            raise ModelError("unsupported PyTorch checkpoint protocol")
        _Unpickler(stream, storages).load()  # the writer's system info
        obj = _Unpickler(stream, storages).load()
        keys = _Unpickler(stream, storages).load()
        for key in keys:
            storage = storages[key]
            count = int(np.frombuffer(stream.read(8), dtype="<i8")[0])
            raw = stream.read(count * storage.dtype.itemsize)
            if count != storage.numel or len(raw) != count * storage.dtype.itemsize:
                raise ModelError(f"storage {key} is truncated or its size is wrong")
            storage.data = np.frombuffer(raw, dtype=storage.dtype)
    except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError) as exc:
        raise ModelError(f"cannot read the PyTorch checkpoint: {exc}") from exc
    return _tensors(obj)
