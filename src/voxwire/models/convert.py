"""Convert a CTranslate2 Whisper checkpoint into a whisper.cpp ggml model file.

The mapping (CTranslate2 name -> whisper.cpp name):

- ``{encoder,decoder}/layer_N/self_attention/linear_0`` is q, k and v fused
  ``[3d, d]``: split into ``attn.query/key/value``; ``linear_1`` -> ``attn.out``;
- ``decoder/layer_N/attention/linear_0`` -> ``cross_attn.query``, ``linear_1``
  is k and v fused ``[2d, d]``: split; ``linear_2`` -> ``cross_attn.out``;
- the key bias is dropped: whisper has none (CTranslate2 stores zeros, and a
  key bias cannot change attention weights anyway);
- ``*/layer_norm`` -> ``attn_ln``, ``cross_attn_ln``, ``mlp_ln``,
  ``encoder.ln_post``, ``decoder.ln``; ``gamma/beta`` -> ``weight/bias``;
  ``ffn/linear_0,1`` -> ``mlp.0``, ``mlp.2``; conv biases become ``(n, 1)``;
- ``decoder/projection`` aliases the token embedding and is not written.

Tensor types follow :func:`voxwire.models.ggml.expected_tensors`; 2-D weights
are quantized by ggml itself (``ggml_quantize_chunk`` from the libggml-base
that ships in the pywhispercpp wheel). The file is written to a temporary name
next to the target and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import struct
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from voxwire.core.errors import ModelConversionError
from voxwire.models.ct2 import Ct2Checkpoint, Ct2Model, load_checkpoint
from voxwire.models.ggml import (
    GgmlType,
    Hparams,
    expected_tensors,
    file_ftype,
    tensor_header,
    tensor_nbytes,
)

ProgressCallback = Callable[[float], None]
"""Called with the fraction of the weights written so far (0 to 1) while converting."""

Array = npt.NDArray[Any]

SAMPLE_RATE = 16_000
N_FFT = 400
END_OF_TEXT = "<|endoftext|>"


def mel_filters(n_mels: int, *, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> Array:
    """Slaney-scale, Slaney-normalised triangular mel filters ``(n_mels, n_fft // 2 + 1)``.

    The same values as ``librosa.filters.mel(sr, n_fft, n_mels)``, which Whisper
    was trained with.
    """
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0

    def hz_to_mel(hz: float) -> float:
        if hz < min_log_hz:
            return hz / f_sp
        return float(min_log_mel + np.log(hz / min_log_hz) / logstep)

    def mel_to_hz(mels: Array) -> Array:
        linear = f_sp * mels
        log = min_log_hz * np.exp(logstep * (mels - min_log_mel))
        return np.where(mels >= min_log_mel, log, linear)

    fft_freqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sample_rate)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fft_freqs)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]
    filters: Array = weights.astype(np.float32)
    return filters


@cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable-character -> byte map (the reverse of ``bytes_to_unicode``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def decode_vocabulary(tokens: list[str]) -> list[bytes]:
    """The byte strings of the text tokens (those below ``<|endoftext|>``)."""
    try:
        end = tokens.index(END_OF_TEXT)
    except ValueError:
        raise ModelConversionError(f"the vocabulary has no {END_OF_TEXT} token") from None
    decoder = _byte_decoder()
    try:
        return [bytes(decoder[c] for c in token) for token in tokens[:end]]
    except KeyError as exc:
        raise ModelConversionError(
            f"vocabulary token with non byte-level character {exc}"
        ) from None


def _count_layers(model: Ct2Model, side: str) -> int:
    pattern = re.compile(rf"{side}/layer_(\d+)/")
    found = {int(m.group(1)) for name in model.variables if (m := pattern.match(name))}
    if found != set(range(len(found))) or not found:
        raise ModelConversionError(f"{side} layers {sorted(found)} are not numbered 0..n-1")
    return len(found)


def hparams_for(model: Ct2Model, ftype: int) -> Hparams:
    """The whisper.cpp header of ``model``, read from its tensor shapes and scalars."""
    if model.spec_name != "WhisperSpec":
        raise ModelConversionError(f"not a Whisper checkpoint: spec is {model.spec_name!r}")
    n_vocab, n_text_state = model.get("decoder/embeddings/weight").shape
    n_audio_ctx, n_audio_state = model.get("encoder/position_encodings/encodings").shape
    return Hparams(
        n_vocab=n_vocab,
        n_audio_ctx=n_audio_ctx,
        n_audio_state=n_audio_state,
        n_audio_head=model.scalar("encoder/num_heads"),
        n_audio_layer=_count_layers(model, "encoder"),
        n_text_ctx=model.get("decoder/position_encodings/encodings").shape[0],
        n_text_state=n_text_state,
        n_text_head=model.scalar("decoder/num_heads"),
        n_text_layer=_count_layers(model, "decoder"),
        n_mels=model.get("encoder/conv1/weight").shape[1],
        ftype=ftype,
    )


def _linear(model: Ct2Model, src: str, dst: str) -> Iterator[tuple[str, Array]]:
    yield f"{dst}.weight", model.get(f"{src}/weight")
    yield f"{dst}.bias", model.get(f"{src}/bias")


def _norm(model: Ct2Model, src: str, dst: str) -> Iterator[tuple[str, Array]]:
    yield f"{dst}.weight", model.get(f"{src}/gamma")
    yield f"{dst}.bias", model.get(f"{src}/beta")


def _fused(model: Ct2Model, src: str, dst: str, parts: list[str]) -> Iterator[tuple[str, Array]]:
    """Split a fused projection into ``parts``; the key's bias is dropped."""
    weights = np.split(model.get(f"{src}/weight"), len(parts), axis=0)
    biases = np.split(model.get(f"{src}/bias"), len(parts), axis=0)
    for part, weight, bias in zip(parts, weights, biases, strict=True):
        yield f"{dst}.{part}.weight", weight
        if part != "key":
            yield f"{dst}.{part}.bias", bias


def _layer(model: Ct2Model, side: str, i: int) -> Iterator[tuple[str, Array]]:
    src, dst = f"{side}/layer_{i}", f"{side}.blocks.{i}"
    yield from _norm(model, f"{src}/self_attention/layer_norm", f"{dst}.attn_ln")
    yield from _fused(
        model, f"{src}/self_attention/linear_0", f"{dst}.attn", ["query", "key", "value"]
    )
    yield from _linear(model, f"{src}/self_attention/linear_1", f"{dst}.attn.out")
    if side == "decoder":
        yield from _norm(model, f"{src}/attention/layer_norm", f"{dst}.cross_attn_ln")
        yield from _linear(model, f"{src}/attention/linear_0", f"{dst}.cross_attn.query")
        yield from _fused(model, f"{src}/attention/linear_1", f"{dst}.cross_attn", ["key", "value"])
        yield from _linear(model, f"{src}/attention/linear_2", f"{dst}.cross_attn.out")
    yield from _norm(model, f"{src}/ffn/layer_norm", f"{dst}.mlp_ln")
    yield from _linear(model, f"{src}/ffn/linear_0", f"{dst}.mlp.0")
    yield from _linear(model, f"{src}/ffn/linear_1", f"{dst}.mlp.2")


def map_tensors(model: Ct2Model, hp: Hparams) -> dict[str, Array]:
    """Every whisper.cpp tensor of ``model`` under its ggml name (numpy shapes, source dtype)."""
    tensors: dict[str, Array] = {
        "encoder.positional_embedding": model.get("encoder/position_encodings/encodings"),
        "encoder.conv1.weight": model.get("encoder/conv1/weight"),
        "encoder.conv1.bias": model.get("encoder/conv1/bias").reshape(-1, 1),
        "encoder.conv2.weight": model.get("encoder/conv2/weight"),
        "encoder.conv2.bias": model.get("encoder/conv2/bias").reshape(-1, 1),
        "decoder.positional_embedding": model.get("decoder/position_encodings/encodings"),
        "decoder.token_embedding.weight": model.get("decoder/embeddings/weight"),
    }
    tensors.update(_norm(model, "encoder/layer_norm", "encoder.ln_post"))
    tensors.update(_norm(model, "decoder/layer_norm", "decoder.ln"))
    for i in range(hp.n_audio_layer):
        tensors.update(_layer(model, "encoder", i))
    for i in range(hp.n_text_layer):
        tensors.update(_layer(model, "decoder", i))
    return tensors


def _find_libggml_base() -> Path:
    import pywhispercpp

    site = Path(pywhispercpp.__file__).resolve().parent.parent
    for folder in (site / "pywhispercpp.libs", site / "pywhispercpp" / ".dylibs", site):
        for pattern in ("libggml-base*.so*", "libggml-base*.dylib"):
            found = sorted(folder.glob(pattern))
            if found:
                return found[0]
    raise ModelConversionError(
        "cannot find libggml-base from the pywhispercpp wheel to quantize with",
        hint="convert to f16, or reinstall pywhispercpp",
    )


@cache
def _ggml_quantize_chunk() -> Any:
    lib = ctypes.CDLL(str(_find_libggml_base()))
    fn = lib.ggml_quantize_chunk
    fn.restype = ctypes.c_size_t
    fn.argtypes = [
        ctypes.c_int,  # enum ggml_type
        ctypes.c_void_p,  # const float * src
        ctypes.c_void_p,  # void * dst
        ctypes.c_int64,  # start
        ctypes.c_int64,  # nrows
        ctypes.c_int64,  # n_per_row
        ctypes.c_void_p,  # const float * imatrix
    ]
    return fn


def quantize(data: Array, ggml_type: GgmlType) -> bytes:
    """Quantize a 2-D array row by row with ggml's own code."""
    if data.ndim != 2:
        raise ModelConversionError(f"only 2-D tensors can be quantized, got shape {data.shape}")
    src = np.ascontiguousarray(data, dtype=np.float32)
    nbytes = tensor_nbytes(ggml_type, src.shape)
    dst = ctypes.create_string_buffer(nbytes)
    rows, n_per_row = src.shape
    written = _ggml_quantize_chunk()(int(ggml_type), src.ctypes.data, dst, 0, rows, n_per_row, None)
    if written != nbytes:
        raise ModelConversionError(
            f"ggml wrote {written} bytes for {ggml_type.name}, expected {nbytes}"
        )
    return dst.raw


def _encode(data: Array, ggml_type: GgmlType) -> bytes:
    if ggml_type == GgmlType.F32:
        return np.ascontiguousarray(data, dtype="<f4").tobytes()
    if ggml_type == GgmlType.F16:
        return np.ascontiguousarray(data, dtype="<f2").tobytes()
    return quantize(data, ggml_type)


def _write_model(
    out: BinaryIO, ckpt: Ct2Checkpoint, weight_type: GgmlType, progress: ProgressCallback | None
) -> None:
    hp = hparams_for(ckpt.model, file_ftype(weight_type))
    specs = expected_tensors(hp)
    tensors = map_tensors(ckpt.model, hp)
    if extra := tensors.keys() - specs.keys():
        raise ModelConversionError(f"converter produced tensors whisper.cpp does not know: {extra}")
    filters = mel_filters(hp.n_mels)
    out.write(hp.pack())
    out.write(struct.pack("<2i", *filters.shape))
    out.write(filters.astype("<f4").tobytes())
    vocab = decode_vocabulary(ckpt.vocabulary)
    out.write(struct.pack("<i", len(vocab)))
    for token in vocab:
        out.write(struct.pack("<i", len(token)) + token)
    total = sum(math.prod(spec.shape) for spec in specs.values())
    done = 0
    for name, spec in specs.items():
        data = tensors.get(name)
        if data is None:
            raise ModelConversionError(f"the checkpoint has nothing for tensor {name!r}")
        if data.shape != spec.shape:
            raise ModelConversionError(
                f"{name}: shape {data.shape}, whisper.cpp expects {spec.shape}"
            )
        ggml_type = spec.ggml_type(hp)
        out.write(tensor_header(name, ggml_type, spec.shape))
        out.write(_encode(data, ggml_type))
        done += data.size
        if progress is not None:
            progress(done / total)


def convert(
    checkpoint: Path,
    output: Path,
    weight_type: GgmlType = GgmlType.F16,
    progress: ProgressCallback | None = None,
) -> Path:
    """Convert the CTranslate2 Whisper checkpoint directory ``checkpoint`` to ``output``.

    ``weight_type`` is the type of 2-D weights: ``F16`` or a quantized type
    such as ``Q8_0``. The output appears atomically; returns its path. Raises
    :class:`voxwire.core.errors.ModelConversionError`.
    """
    ckpt = load_checkpoint(checkpoint)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            _write_model(out, ckpt, weight_type, progress)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(0o644)  # mkstemp creates 0600
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ModelConversionError(f"cannot write {output}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return output
