"""``voxwire devices``: the device each engine would run on here, and the CUDA
libraries it would load.

A worker chooses its device at start-up (:mod:`voxwire.workers.engines.device`);
this command makes the same choice without loading a model or starting
anything, so an operator can check a machine or an image before deploying it:
the GPU image on a machine without a GPU says it would run on the CPU and
where it found cuBLAS. It exits 1 when the configured engine cannot have the
device asked for (``--device``, else the ``device`` setting), or with
``--need-cuda-libraries`` when a CUDA library the engine loads is missing.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from voxwire.cli.common import console, fail
from voxwire.core.config import load_settings
from voxwire.core.errors import VoxwireError
from voxwire.workers.engines import cuda_libraries, faster_whisper, ggml_devices
from voxwire.workers.engines import device as device_choice


def devices(
    device: Annotated[
        str | None,
        typer.Option(help="the device setting to check: auto, cpu, cuda, cuda:N [configured]"),
    ] = None,
    need_cuda_libraries: Annotated[
        bool,
        typer.Option(
            "--need-cuda-libraries",
            help="exit 1 unless the CUDA libraries faster-whisper loads are found",
        ),
    ] = False,
) -> None:
    """Show the device each engine would run on here, and the CUDA libraries it loads."""
    try:
        settings = load_settings(device=device) if device else load_settings()
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    requested = settings.engine.device
    _say(f"device = {requested}; configured engine: {settings.engine.name}")
    refused: VoxwireError | None = None
    for name, found in (
        ("faster-whisper", faster_whisper.accelerators()),
        ("whispercpp", ggml_devices.accelerators()),
    ):
        try:
            chosen = device_choice.choose_device(requested, found)
        except VoxwireError as exc:
            _say(f"{name}: cannot run on {requested}: {exc.message}")
            if name == settings.engine.name:
                refused = exc
            continue
        _say(f"{name}: {chosen} ({chosen.reason})")
    libraries = [cuda_libraries.load(n) for n in cuda_libraries.FASTER_WHISPER_LIBRARIES]
    _say("faster-whisper's CUDA libraries:")
    for library in libraries:
        _say(f"  {library}")
    if refused is not None:
        fail(escape(refused.message), escape(refused.hint or ""))
    missing = [library.name for library in libraries if not library.found]
    if need_cuda_libraries and missing:
        fail(f"missing {', '.join(missing)}", hint=escape(faster_whisper.CUDA_FIX))


def _say(line: str) -> None:
    """One line as it is: no markup, highlighting or wrapping (scripts read it)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)
