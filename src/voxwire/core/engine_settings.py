"""The speech-to-text engine's settings (the ``engine`` group of
:class:`voxwire.core.config.Settings`), models and pools included.

A platform serves the engine's ``model`` (the default) and the pools'
``models``; a session that names no model takes its language's route
(``routes``: ``{"de": "base", "*": "base"}``, ``*`` for every other language
and for ``auto``), else ``model``. A worker process runs ``serve`` (every
served model when empty), one pool per model: see :mod:`voxwire.wire.pools`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_FROZEN = ConfigDict(frozen=True, extra="forbid")

COMPUTE_TYPES = frozenset(
    {"default", "auto", "int8", "int8_float16", "int8_float32", "int8_bfloat16", "int16", "q4_0"}
    | {"float16", "bfloat16", "float32", "f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1"}
)
"""``compute_type`` values: CTranslate2's (faster-whisper) and ggml weight types (whisper.cpp)."""


class EngineSettings(BaseModel):
    """The speech-to-text engine and how many of it run."""

    model_config = _FROZEN

    name: Literal["whispercpp", "faster-whisper"] = Field(
        default="faster-whisper",
        description="faster-whisper (CTranslate2 int8) or whispercpp; benchmarks/bench_engines.py "
        "and bench_streams.py compare them",
    )
    model: str = "tiny.en"
    language: str = "en"
    beam_size: int = Field(default=1, ge=1, le=8)
    workers: int = Field(default=0, ge=0, le=32, description=(
        "engine instances for files, each running one job at a time (0: the CPU cores "
        "divided by threads)"))  # fmt: skip
    threads: int = Field(default=0, ge=0, le=64, description=(
        "threads per engine instance for files (0: faster-whisper 1, whose second thread "
        "scarcely sped a file up while a second 1-thread engine moved 1.5x the audio; "
        "whispercpp the cores, at most 4, as its threads do speed a file up)"))  # fmt: skip
    stream_engines: int = Field(
        default=0,
        ge=0,
        le=32,
        description="engine instances for live streams, each serving one stream at a time, "
        "the cores shared among them; 0: one per CPU core (at most 4) and a wide one with "
        "every core (at most 4) for a final that is the only work",
    )
    max_streams: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="live streams a stream worker holds at most; one more is refused with a "
        "too_many_streams error instead of every stream falling behind (0: no limit)",
    )
    file_order: Literal["fair", "arrival"] = Field(
        default="fair",
        description="which waiting file job a worker runs next: fair shares engine time "
        "among tenants (a tenant's backlog never holds another's upload for more than the "
        "jobs already running); arrival runs them in bus order",
    )
    file_nice: int = Field(
        default=19,
        ge=0,
        le=19,
        description="how much lower than live streams file jobs run on the CPU (the nice "
        "scale, 0 to 19; 0: the same): live finals first when both want the cores; with "
        "100 files queued, a live stream's final p95 was 6.2x its idle p95 at 0, 1.6x at 10 "
        "and 1.3x at 19 (bench_tenants.py, two workers)",
    )
    batch_finals: int = Field(
        default=1,
        ge=1,
        le=32,
        description="live finals of this many sessions at most in one engine call, where the "
        "engine batches (faster-whisper); 1, the default, does not batch: on 2 CPU cores it "
        "made finals later (bench_streams.py)",
    )
    word_timestamps: bool = Field(
        default=True,
        description="give every final segment its words, with times and confidence "
        "(benchmarks/bench_words.py measures what they cost)",
    )
    device: str = Field(
        default="auto",
        description="auto (a CUDA device when the engine can use one, else the CPU), cpu, "
        "cuda or cuda:N; the choice is logged at start-up and shown in /healthz",
    )
    compute_type: str = "default"
    """faster-whisper: CTranslate2's compute type (default: int8 on the CPU, float16 on
    CUDA); whisper.cpp computes in its model file's type (default, or f16, q8_0, q5_0...)"""
    worker_kind: Literal["all", "files", "streams"] = Field(
        default="all",
        description="what a worker process serves: uploaded files, live streams, or both "
        "(separate pools scale apart)",
    )

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        if re.fullmatch(r"auto|cpu|cuda(:\d{1,2})?", value.strip().lower()) is None:
            raise ValueError(f"{value!r} is not auto, cpu, cuda or cuda:N (N = 0, 1...)")
        return value.strip().lower()

    @field_validator("compute_type")
    @classmethod
    def _known_compute_type(cls, value: str) -> str:
        if value not in COMPUTE_TYPES:
            raise ValueError(f"{value!r} is not one of {', '.join(sorted(COMPUTE_TYPES))}")
        return value


class PoolSettings(BaseModel):
    """The models a platform serves besides the engine's ``model``, which
    language goes to which, and the models of this worker process (its pools)."""

    model_config = _FROZEN

    models: tuple[str, ...] = Field(
        default=(),
        description="models the platform serves besides `model`, the default "
        "(a list, or names with commas: base,base-q5_0)",
    )
    routes: dict[str, str] = Field(
        default_factory=dict,
        description="language -> model for a session that names no model, '*' for every "
        "other language and 'auto' (a TOML table, or en=tiny.en,*=base)",
    )
    serve: tuple[str, ...] = Field(
        default=(),
        description="the models this worker process runs, one pool each (empty: every "
        "served model); a session's model with no worker running it is refused (503)",
    )

    @field_validator("models", "serve", mode="before")
    @classmethod
    def _names_with_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("routes", mode="before")
    @classmethod
    def _pairs_with_commas(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs = [pair.split("=", 1) for pair in value.split(",") if pair.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"{value!r} is not like en=tiny.en,*=base")
        return {language.strip().lower(): model.strip() for language, model in pairs}


class LiveSettings(BaseModel):
    """How a live final is decoded: with what came before it, and on what window."""

    model_config = _FROZEN

    stream_context_chars: int = Field(default=0, ge=0, le=1000, description=(
        "decode a live final with at most this many characters of its stream's earlier finals "
        "as the prompt (0: none; tiny.en lost words, time: bench_live_accuracy.py)"))  # fmt: skip
    stream_lead_s: float = Field(default=0.0, ge=0.0, le=25.0, description=(
        "decode a live final after this many s of the audio before it (0: none)"))  # fmt: skip
    live_window_s: int = Field(
        default=10,
        ge=0,
        le=30,
        description="faster-whisper: encode a live final or partial on a window of this many "
        "seconds (at least the segment and 4 s more; a session with a vocabulary keeps 30 s), "
        "not Whisper's 30 s: 4 streams' finals came 2x sooner at the same WER (0: 30 s)",
    )
