"""The samples every engine, VAD and stream works on (no decoder needed).

:mod:`voxwire.audio.decoding` decodes files into these with PyAV; the engines
import only this module, so they load where PyAV is not installed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
"""Every engine, VAD and stream works at 16 kHz."""

Audio = npt.NDArray[np.float32]
"""Mono float32 samples at 16 kHz in [-1, 1]."""
