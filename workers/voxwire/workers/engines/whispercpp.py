"""The whisper.cpp engine, through the pywhispercpp bindings.

It uses the compiled ``_pywhispercpp`` module directly rather than
``pywhispercpp.model.Model``, because the latter keeps decode parameters from
one call to the next (a prompt would leak into the next job), cannot tell a
failed load from a good one, and silences whisper.cpp by redirecting the
process-wide stderr file descriptor.

What whisper.cpp 1.8.5 does that shapes this module:

- a failed load still returns a context object (a NULL inside); using it
  crashes. It also accepts some truncated files silently and aborts the
  process (through gdb, which can hang a piped parent) on an unknown file
  type. So every file is checked with :func:`voxwire.models.validate` first,
  and errors logged during the load turn into :class:`ModelError`;
- it logs to stderr through a process-wide callback. The first engine routes
  that callback to the ``voxwire.workers.engines.whispercpp`` logger (info at
  DEBUG) and restores the default at exit: a Python callback still set when
  the interpreter finalises makes the process abort. It also sets
  ``GGML_NO_BACKTRACE=1`` (unless set): on an internal error ggml otherwise
  attaches gdb, and a crashed worker hangs instead of exiting;
- ``whisper_full`` releases the GIL, so other Python threads keep running;
  segment times are in centiseconds; no-speech probability is not exposed by
  the bindings, so :attr:`Segment.no_speech_prob` stays 0;
- word times come from its token timestamps (``token_timestamps``, from the
  timestamp tokens' probabilities, no extra pass): tokens are merged into
  words at the spaces that start them.

Flash attention is on by default: on the eval set it ran 1.47x faster with
the same WER (``benchmarks/bench_engines.py``). ``EngineOptions.audio_ctx``
cut to a clip's length was slower there and tripled the WER (whisper repeats
itself on a shortened encoder window), so nothing sets it by default.

Thread-safety: load an engine once and reuse it; one instance serves one
thread at a time. Concurrent calls on one instance are serialised by a lock;
for parallel transcription create one engine per thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import _pywhispercpp as pw  # type: ignore[import-not-found]
import numpy as np

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.errors import EngineError, ModelError
from voxwire.models import validate
from voxwire.workers.engine import (
    EngineOptions,
    Segment,
    SegmentCallback,
    TranscriptionAborted,
    Word,
    check_audio,
    check_task,
    clean_text,
    fit_words,
)
from voxwire.workers.engines.device import Device, choose_device
from voxwire.workers.engines.ggml_devices import accelerators

log = logging.getLogger(__name__)

# ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation.
_GGML_ERROR = 4
_MULTILINGUAL_VOCAB = 51865  # whisper.cpp's test for a multilingual model
_LOG_LEVELS = {3: logging.WARNING, 4: logging.ERROR}

_ABORTED = ("failed to encode", "failed to decode")  # what whisper.cpp logs when aborted
_log_lock = threading.Lock()
_log_routed = False
_load_errors: list[str] | None = None


def _on_whisper_log(level: int, text: str) -> None:
    message = text.rstrip()
    if level == _GGML_ERROR and _load_errors is not None:
        _load_errors.append(message)
    if message.endswith(_ABORTED):  # also an abort asked for; a real failure raises anyway
        level = 0
    log.log(_LOG_LEVELS.get(level, logging.DEBUG), "%s", message)


def _route_whisper_logs() -> None:
    global _log_routed
    if not _log_routed:
        pw.whisper_log_set(_on_whisper_log)
        atexit.register(pw.whisper_log_set, None)
        # On an internal error ggml runs gdb for a backtrace, which can hang the process.
        os.environ.setdefault("GGML_NO_BACKTRACE", "1")
        _log_routed = True


def _load(path: Path, device: Device, flash_attn: bool) -> Any:
    """Load a validated model file; raise :class:`ModelError` if whisper.cpp refuses it."""
    global _load_errors
    params = pw.whisper_context_default_params()
    params.use_gpu = device.is_gpu
    params.gpu_device = device.index
    params.flash_attn = flash_attn
    with _log_lock:
        _route_whisper_logs()
        _load_errors = []
        try:
            ctx = pw.whisper_init_from_file_with_params(str(path), params)
            errors, _load_errors = _load_errors, None
        except Exception as exc:
            _load_errors = None
            raise ModelError(f"whisper.cpp cannot load {path}: {exc}") from exc
    if errors:
        raise ModelError(
            f"whisper.cpp cannot load {path}: {errors[0]}",
            hint="run `voxwire models install` or pass another ggml model file",
        )
    return ctx


def _segments(
    ctx: Any,
    start: int,
    end: int,
    duration_ms: int,
    language: tuple[str, float | None],
    *,
    words: bool,
) -> list[Segment]:
    """Segments ``start`` to ``end`` of the last run, markers dropped, times in ms."""
    segments = []
    for i in range(start, end):
        raw: bytes = pw.whisper_full_get_segment_text(ctx, i)
        text = clean_text(raw.decode("utf-8", errors="replace"))
        if not text:
            continue
        # centiseconds; whisper.cpp may stamp the end of its 30 s window
        t0, t1 = pw.whisper_full_get_segment_t0(ctx, i), pw.whisper_full_get_segment_t1(ctx, i)
        start_ms = min(max(0, 10 * int(t0)), duration_ms)
        end_ms = min(max(start_ms, 10 * int(t1)), duration_ms)
        found = fit_words(_words(ctx, i), start_ms, end_ms) if words else ()
        segments.append(Segment(start_ms, end_ms, text, 0.0, *language, words=found))
    return segments


def _words(ctx: Any, segment: int) -> list[Word]:
    """The words of a segment of the last run, from its tokens: a token that
    starts with a space starts a word, the others (word pieces, punctuation)
    continue it; special tokens are left out. A word spans its tokens' times
    (``token_timestamps``), its probability is their mean."""
    eot = pw.whisper_token_eot(ctx)
    pieces: list[tuple[bytes, int, int, list[float]]] = []
    for j in range(pw.whisper_full_n_tokens(ctx, segment)):
        data = pw.whisper_full_get_token_data(ctx, segment, j)
        if data.id >= eot:
            continue
        piece = pw.whisper_token_to_bytes(ctx, data.id)
        t0, t1 = 10 * int(data.t0), 10 * int(data.t1)
        if not pieces or piece.startswith(b" "):
            pieces.append((piece, t0, t1, [float(data.p)]))
        else:
            joined, start, _end, probs = pieces[-1]
            pieces[-1] = (joined + piece, start, max(t1, start), [*probs, float(data.p)])
    return [
        Word(text.decode("utf-8", errors="replace"), start, end, sum(probs) / len(probs))
        for text, start, end, probs in pieces
    ]


def _forwarder(
    on_segment: SegmentCallback,
    failures: list[BaseException],
    duration_ms: int,
    language: tuple[str, float | None],
    words: bool,
) -> Callable[..., None]:
    """A new-segment callback for whisper.cpp that hands new segments to ``on_segment``.

    An exception must not unwind through whisper.cpp: it is kept in
    ``failures``, which also makes the abort callback stop the run.
    """

    def new_segments(ctx: Any, n_new: int, *_: object) -> None:
        if failures:
            return
        try:
            n = pw.whisper_full_n_segments(ctx)
            for segment in _segments(ctx, n - n_new, n, duration_ms, language, words=words):
                on_segment(segment)
        except BaseException as exc:
            failures.append(exc)

    return new_segments


def _check_compute_type(compute_type: str, weight_type: str, path: Path) -> None:
    """whisper.cpp computes in its model file's weight type: ``default`` or that type."""
    if compute_type not in ("default", "auto", weight_type):
        raise EngineError(
            f"whisper.cpp computes in the weight type of its model file ({path.name}: "
            f"{weight_type}), not {compute_type}",
            hint="set compute_type=default, or choose a model file of that type "
            "(e.g. tiny.en-q8_0, tiny.en-q5_0)",
        )


class WhisperCppEngine:
    """A whisper.cpp model loaded once, transcribing 16 kHz float32 audio.

    ``model_path`` is a ggml file (see :func:`voxwire.models.resolve` for
    names). Raises :class:`ModelError` if it is missing, corrupt or refused.
    ``device``: auto, cpu, cuda or cuda:N (:mod:`.device`), :attr:`device`
    the one chosen; :class:`EngineError` if CUDA is asked for and this
    whisper.cpp library was built without it or sees no such device.
    """

    name = "whispercpp"

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "auto",
        compute_type: str = "default",
        flash_attn: bool = True,
    ) -> None:
        self.model_path = Path(model_path)
        info = validate(self.model_path)
        _check_compute_type(compute_type, info.weight_type.name.lower(), self.model_path)
        self.multilingual = info.hparams.n_vocab >= _MULTILINGUAL_VOCAB
        self.device = choose_device(device, accelerators())
        self._lock = threading.Lock()
        self._ctx: Any = _load(self.model_path, self.device.device, flash_attn)

    def __repr__(self) -> str:
        return f"WhisperCppEngine({str(self.model_path)!r})"

    def detect_language(self, audio: Audio, options: EngineOptions) -> tuple[str, float]:
        """The most likely language of the first 30 s of ``audio``, and its probability."""
        samples = check_audio(audio)[: 30 * SAMPLE_RATE]
        if not self.multilingual:
            return "en", 1.0
        if samples.size < SAMPLE_RATE // 10:
            raise EngineError("too little audio to tell its language (less than 0.1 s)")
        probs = np.zeros(pw.whisper_lang_max_id() + 1, dtype=np.float32)
        threads = max(1, options.threads)
        with self._lock:
            if self._ctx is None:
                raise EngineError("the engine is closed")
            if pw.whisper_pcm_to_mel(self._ctx, samples, samples.size, threads) != 0:
                raise EngineError("whisper.cpp could not compute the spectrogram")
            found = pw.whisper_lang_auto_detect(self._ctx, 0, threads, probs)
        if found < 0:
            raise EngineError("whisper.cpp could not detect the language")
        return str(pw.whisper_lang_str(found)), float(probs[found])

    def _params(self, options: EngineOptions) -> Any:
        language = options.language or "auto"
        if language != "auto" and pw.whisper_lang_id(language) < 0:
            raise EngineError(f"unknown language {language!r}")
        if not self.multilingual and language not in ("en", "auto"):
            raise EngineError(
                f"model {self.model_path.name} is English-only, cannot transcribe {language!r}",
                hint="use a multilingual model",
            )
        translate = check_task(options.task, self.multilingual, self.model_path.name)
        beam = options.beam_size > 1
        sampling = pw.whisper_sampling_strategy
        params = pw.whisper_full_default_params(
            sampling.WHISPER_SAMPLING_BEAM_SEARCH if beam else sampling.WHISPER_SAMPLING_GREEDY
        )
        if beam:
            params.beam_search = {"beam_size": options.beam_size, "patience": -1.0}
        params.n_threads = max(1, options.threads)
        params.audio_ctx = options.audio_ctx
        # "auto" on an English-only model makes whisper.cpp log an error.
        params.language = language if self.multilingual else "en"
        params.temperature = options.temperature
        if not options.engine_fallback:  # one temperature: no ladder of its own
            params.temperature_inc = 0.0
        params.translate = translate
        if options.prompt:  # after a space, as faster-whisper and Whisper's own code give it
            params.initial_prompt = " " + options.prompt.strip()
        params.print_progress = False
        params.print_realtime = False
        params.print_timestamps = False
        params.print_special = False
        params.token_timestamps = options.word_timestamps
        return params

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        """Transcribe ``audio``; ``on_segment`` sees each segment as whisper.cpp
        produces it. An exception raised by ``on_segment`` stops the
        transcription and is re-raised as is; ``abort`` returning True stops it
        with :class:`TranscriptionAborted` (whisper.cpp polls it while it
        computes). Other failures raise :class:`EngineError`."""
        samples = check_audio(audio)
        if samples.size < SAMPLE_RATE // 10:
            return []  # whisper.cpp refuses less than 100 ms
        language: tuple[str, float | None] = (options.language, None)
        if self.multilingual and options.language in ("", "auto"):
            language = self.detect_language(samples, options)
            options = replace(options, language=language[0])
        elif not self.multilingual and options.language in ("", "auto"):
            language = ("en", None)
        params = self._params(options)
        duration_ms = samples.size * 1000 // SAMPLE_RATE
        failures: list[BaseException] = []
        if on_segment is not None:
            words = options.word_timestamps
            forward = _forwarder(on_segment, failures, duration_ms, language, words)
            pw.assign_new_segment_callback(params, forward)
        aborted: list[bool] = []

        def stop() -> bool:
            if failures:
                return True
            if abort is not None and abort():
                aborted.append(True)
                return True
            return False

        pw.assign_abort_callback(params, stop)
        with self._lock:
            ctx = self._ctx
            if ctx is None:
                raise EngineError("the engine is closed")
            try:
                code = pw.whisper_full(ctx, params, samples, samples.size)
            except Exception as exc:
                raise EngineError(f"whisper.cpp failed: {exc}") from exc
            if failures:
                raise failures[0]
            if aborted:
                raise TranscriptionAborted("transcription aborted")
            if code != 0:
                raise EngineError(f"whisper.cpp failed with code {code}")
            n = pw.whisper_full_n_segments(ctx)
            return _segments(ctx, 0, n, duration_ms, language, words=options.word_timestamps)

    def close(self) -> None:
        """Free the model. Further calls to :meth:`transcribe` raise :class:`EngineError`."""
        with self._lock:
            ctx, self._ctx = self._ctx, None
        if ctx is not None:
            pw.whisper_free(ctx)

    def __del__(self) -> None:
        # A forgotten close() must not leak the model's memory.
        if getattr(self, "_ctx", None) is not None:
            self.close()

    def __enter__(self) -> WhisperCppEngine:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
