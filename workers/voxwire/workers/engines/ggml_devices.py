"""The devices whisper.cpp's ggml library sees, read through ctypes.

pywhispercpp exposes whisper.cpp's system information (which backends the
library was built with: ``CUDA : ARCHS = 900 | ...`` in a CUDA build) but not
ggml's device list; that list, with each device's memory, comes from the
``ggml_backend_dev_*`` functions of the libggml the extension module loaded.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from voxwire.workers.engines.device import Accelerators

GPU_TYPES = (1, 2)  # enum ggml_backend_dev_type: 0 CPU, 1 GPU, 2 IGPU, 3 ACCEL, 4 META
BUILD_FIX = "build the whisper.cpp engine with CUDA: scripts/build-cuda.sh"


@dataclass(frozen=True, slots=True)
class GgmlDevice:
    """One ggml backend device (``CUDA0``, ``CPU``...)."""

    name: str
    description: str
    type: int
    free_bytes: int
    total_bytes: int

    @property
    def is_gpu(self) -> bool:
        return self.type in GPU_TYPES


def system_info() -> str:
    """whisper.cpp's system information: the backends and CPU features it was built with."""
    import _pywhispercpp as pw  # type: ignore[import-not-found]

    return str(pw.whisper_print_system_info())


def built_with_cuda(info: str) -> bool:
    """Whether ``info`` (:func:`system_info`) names the CUDA backend."""
    return re.search(r"(^|\|)\s*CUDA\s*:", info) is not None


def _libggml() -> Path | None:
    """The libggml (not -base, not a backend) the extension module loaded."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        name = Path(path).name
        if re.match(r"^libggml(-[0-9a-f]{8})?\.so", name):
            return Path(path)
    return None


@cache
def _api() -> Any:
    path = _libggml()
    if path is None:
        return None
    lib = ctypes.CDLL(str(path))
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, name).restype = ctypes.c_char_p
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    size_p = ctypes.POINTER(ctypes.c_size_t)
    lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, size_p, size_p]
    return lib


def devices() -> list[GgmlDevice]:
    """ggml's devices, in its order (GPUs first); empty if the library cannot be read."""
    system_info()  # loads the extension module, and with it libggml
    lib = _api()
    if lib is None:
        return []
    found = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(
            GgmlDevice(
                name=lib.ggml_backend_dev_name(dev).decode(),
                description=lib.ggml_backend_dev_description(dev).decode(),
                type=int(lib.ggml_backend_dev_type(dev)),
                free_bytes=free.value,
                total_bytes=total.value,
            )
        )
    return found


def cuda_devices() -> list[GgmlDevice]:
    """The CUDA devices whisper.cpp can run on, in the order ``gpu_device`` counts them."""
    return [d for d in devices() if d.is_gpu and d.name.upper().startswith("CUDA")]


def accelerators() -> Accelerators:
    """What the loaded whisper.cpp library can use on this machine."""
    info = system_info()
    if not built_with_cuda(info):
        return Accelerators("whisper.cpp", cuda_build=False, fix=BUILD_FIX)
    gpus = tuple(d.description for d in cuda_devices())
    return Accelerators("whisper.cpp", cuda_build=True, gpus=gpus, fix=BUILD_FIX)
