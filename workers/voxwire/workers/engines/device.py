"""Which device an engine runs on: the ``device`` setting, checked against the engine.

``device`` is ``auto``, ``cpu``, ``cuda`` (the first CUDA device) or ``cuda:N``.
Each engine reports what its build can use on this machine as
:class:`Accelerators` (whisper.cpp: whether the loaded library was built with
CUDA and which GPUs ggml sees; faster-whisper: the CUDA devices CTranslate2
counts and whether the CUDA libraries it loads are there), and
:func:`choose_device` turns the setting into a :class:`Device` and a sentence
that says why, for the start-up log and ``/healthz``::

    auto   the first CUDA device when the engine can use one, else the CPU
    cpu    the CPU, always
    cuda   cuda:0
    cuda:N the N-th CUDA device the engine sees

Asking for CUDA where the engine cannot use it raises :class:`EngineError` at
start-up, with what to do (build the engine with CUDA, pick another device),
never a crash at the first transcription.

:func:`instances_for` sizes the engine instances of one GPU by its free memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from voxwire.core.errors import ConfigError, EngineError

_DEVICE = re.compile(r"^(auto|cpu|cuda)(?::(\d{1,2}))?$")


@dataclass(frozen=True, slots=True)
class Device:
    """A device an engine runs on."""

    kind: Literal["cpu", "cuda"]
    index: int = 0

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"


CPU = Device("cpu")


def parse_device(text: str) -> Device | None:
    """``auto`` -> None; ``cpu``, ``cuda``, ``cuda:N`` -> the :class:`Device`.
    Raises :class:`ConfigError` for anything else."""
    found = _DEVICE.match(text.strip().lower())
    if found is None or (found[2] is not None and found[1] != "cuda"):
        raise ConfigError(
            f"unknown device {text!r}", hint="set device to auto, cpu, cuda or cuda:N (N = 0, 1...)"
        )
    if found[1] == "auto":
        return None
    if found[1] == "cpu":
        return CPU
    return Device("cuda", int(found[2] or 0))


@dataclass(frozen=True, slots=True)
class Accelerators:
    """What one engine's build can use on this machine.

    ``cuda_build``: the engine can run on CUDA at all; ``gpus``: the CUDA
    devices it sees, in its order; ``problem``: why it cannot use them although
    it sees them (libraries that do not match), empty when it can; ``fix``:
    how to get an engine that can.
    """

    engine: str
    cuda_build: bool
    gpus: tuple[str, ...] = ()
    problem: str = ""
    fix: str = ""

    @property
    def usable(self) -> bool:
        return self.cuda_build and bool(self.gpus) and not self.problem


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """The device chosen for an engine, and why (said at start-up and in /healthz)."""

    device: Device
    reason: str
    name: str = ""
    """The device's own name (``NVIDIA H200``), empty for the CPU."""

    def __str__(self) -> str:
        return f"{self.device} ({self.name})" if self.name else str(self.device)


def choose_device(requested: str, found: Accelerators) -> DeviceChoice:
    """The device for ``requested`` (the ``device`` setting) given what the engine
    can use; :class:`EngineError` when CUDA is asked for and cannot be had."""
    wanted = parse_device(requested)
    if wanted is not None and not wanted.is_gpu:
        return DeviceChoice(CPU, "device=cpu")
    if wanted is None:
        if found.usable:
            return DeviceChoice(
                Device("cuda", 0), f"auto: {found.engine} uses CUDA device 0", found.gpus[0]
            )
        return DeviceChoice(CPU, f"auto: {_why_not(found)}, so the CPU")
    if not found.usable:
        raise EngineError(
            f"device={requested} but {_why_not(found)}",
            hint=f"{found.fix}, or set device=cpu (or auto)" if found.fix else "set device=cpu",
        )
    if wanted.index >= len(found.gpus):
        raise EngineError(
            f"device={requested} but {found.engine} sees {len(found.gpus)} CUDA device(s)",
            hint=f"set device=cuda:0 .. cuda:{len(found.gpus) - 1} (or check CUDA_VISIBLE_DEVICES)",
        )
    return DeviceChoice(wanted, f"device={requested}", found.gpus[wanted.index])


def _why_not(found: Accelerators) -> str:
    if not found.cuda_build:
        return f"{found.engine} was built without CUDA"
    if not found.gpus:
        return f"{found.engine} sees no CUDA device"
    return f"{found.engine} cannot use CUDA here: {found.problem}"


def instances_for(
    free_bytes: int, per_instance_bytes: int, *, reserve: float = 0.1, most: int = 64
) -> int:
    """How many engine instances fit on one device with ``free_bytes`` free, each
    taking ``per_instance_bytes`` (model weights plus its buffers), keeping
    ``reserve`` of the free memory spare; at least 1, at most ``most``."""
    if per_instance_bytes <= 0:
        raise ValueError("per_instance_bytes must be positive")
    usable = int(free_bytes * (1 - reserve))
    return max(1, min(most, usable // per_instance_bytes))
