"""The CUDA libraries an engine opens at run time, found where pip puts them.

CTranslate2's PyPI wheel (the faster-whisper engine, 4.8.5) carries its CUDA
kernels and runtime and opens one CUDA library by name when it first runs on a
GPU: CUDA 12's cuBLAS, ``libcublas.so.12`` (which needs ``libcublasLt.so.12``).
It neither links nor opens cuDNN: its convolutions run without it. The driver
(``libcuda.so.1``) comes from the host.

The ``gpu`` extra (``pip install 'voxwire[gpu]'``) and the GPU image install
cuBLAS from NVIDIA's wheel ``nvidia-cublas-cu12``, whose folder
(``site-packages/nvidia/cublas/lib``) is on no search path. :func:`load` tries
the library's name first (``LD_LIBRARY_PATH``, the system's libraries), then
the wheel's folder by full path. A library loaded by its full path answers
later opens of its name in this process, so CTranslate2 finds it too without
``LD_LIBRARY_PATH`` (the image sets it all the same).

:func:`load` returns a :class:`Library`: where it was loaded from, or why it
could not be. Nothing here needs a GPU: the libraries load on any machine, so
``voxwire devices`` can check a GPU image on a machine without one.
"""

from __future__ import annotations

import ctypes
import importlib.util
from dataclasses import dataclass
from pathlib import Path

CUBLAS = "libcublas.so.12"
"""The cuBLAS the pinned CTranslate2 (4.8.5) opens on CUDA: CUDA 12's."""
CUBLAS_LT = "libcublasLt.so.12"
"""What cuBLAS itself needs, from the same wheel."""
WHEEL_PACKAGES = {CUBLAS: "nvidia.cublas", CUBLAS_LT: "nvidia.cublas"}
"""The Python package of NVIDIA's wheel that ships each library (in its ``lib``)."""
FASTER_WHISPER_LIBRARIES = (CUBLAS, CUBLAS_LT)
"""What the faster-whisper engine needs on CUDA, beyond the driver."""


@dataclass(frozen=True, slots=True)
class Library:
    """One shared library: the file it was loaded from, or the error that stopped it."""

    name: str
    path: str = ""
    error: str = ""

    @property
    def found(self) -> bool:
        return not self.error

    def __str__(self) -> str:
        return f"{self.name}: {self.path}" if self.found else f"{self.name}: missing ({self.error})"


def load(name: str) -> Library:
    """Load ``name`` (a soname) into this process, globally: by its name, else from
    NVIDIA's wheel. Loading twice is harmless (the loader counts references)."""
    try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as by_name:
        candidate = wheel_folder(name)
        if candidate is None or not (candidate / name).is_file():
            return Library(name, error=f"{by_name}; no {WHEEL_PACKAGES.get(name, 'wheel')} either")
        try:
            ctypes.CDLL(str(candidate / name), mode=ctypes.RTLD_GLOBAL)
        except OSError as by_path:
            return Library(name, error=str(by_path))
    return Library(name, path=loaded_path(name))


def wheel_folder(name: str) -> Path | None:
    """The ``lib`` folder of the installed NVIDIA wheel that ships ``name``, if any."""
    package = WHEEL_PACKAGES.get(name)
    if package is None:
        return None
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def loaded_path(name: str) -> str:
    """The file this process mapped for ``name`` (from ``/proc/self/maps``); the name
    itself where that cannot be read."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return name
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].endswith("/" + name):
            return fields[5]
    return name
