"""The speaker encoder's weights: from Resemblyzer's wheel to a numpy file.

Resemblyzer (PyPI ``resemblyzer``, Apache-2.0, by Resemble AI) ships the
weights of its GE2E speaker encoder (Wan et al., "Generalized end-to-end loss
for speaker verification", 2018) inside its wheel as ``pretrained.pt``: a
3-layer LSTM (40 mel channels in, 256 hidden) and a 256 x 256 linear layer,
trained on LibriSpeech, VoxCeleb 1 and 2. No torch is needed to use them
(:mod:`voxwire.models.npz`): they are written to
``<cache>/models/speaker-ge2e.npz`` and the encoder
(:mod:`voxwire.workers.speakers.encoder`) runs them in numpy.

Nothing of this happens unless a session asks for diarization (or ``voxwire
models install speaker-ge2e``): ``make run`` does not download the 15.7 MB wheel.
"""

from __future__ import annotations

from voxwire.models.catalog import WheelFile
from voxwire.models.npz import NpzModel, Weights

SPEAKER_MODEL = "speaker-ge2e"
"""The speaker encoder's name in the cache and the CLI."""
LICENCE = "Apache-2.0"

LAYERS = 3
"""LSTM layers; each has ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

MODEL = NpzModel(
    name=SPEAKER_MODEL,
    source=WheelFile("resemblyzer==0.1.4", "resemblyzer/pretrained.pt"),
    sha256="39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
    size=17_090_379,
    names=(
        *(
            f"lstm.{kind}_l{layer}"
            for layer in range(LAYERS)
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ),
        "linear.weight",
        "linear.bias",
    ),
    prefix="model_state.",
    format=1,
)

__all__ = ["LAYERS", "LICENCE", "MODEL", "SPEAKER_MODEL", "Weights"]
