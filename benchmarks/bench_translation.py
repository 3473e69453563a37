"""Translation into English (Whisper's translate task) with base, per language and engine.

German, French and Spanish sentences spoken by espeak-ng (evaluation/speech.py)
are translated with the language given and with ``language="auto"``; WER is
against an English reference written for each sentence, after Whisper's
English normaliser (numbers as digits). The German reading of the multilingual
eval recording (../shared/eval, from 30 s on: a person, not a synthesiser) is
translated too, against an English rendering of what it says. For comparison
each row also gives the transcription's WER in the language spoken (against
the sentence itself, language-neutral normaliser), and the speed of both
tasks: audio seconds per wall second, measured in the same run.

    .venv/bin/python benchmarks/bench_translation.py [--engines faster-whisper whispercpp]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.corpus import EVAL_DIR  # noqa: E402
from evaluation.speech import SENTENCES, english_wer, have_espeak, speak, wer  # noqa: E402
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode  # noqa: E402
from voxwire.workers.engine import Engine, EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402

RECORDING = EVAL_DIR / "audio" / "fasterwhisper_multilingual.mp3"
GERMAN_FROM_S = 30.0
GERMAN_READING = (
    "Jedem, der eine Kopie dieser Software und der zugehörigen Dokumentationsdateien erhält, "
    "wird hiermit unentgeltlich die Genehmigung erteilt, uneingeschränkt mit der Software zu "
    "verfahren. Dies umfasst insbesondere das Recht, die Software zu verwenden, zu "
    "vervielfältigen, zu modifizieren, zusammenzufügen, zu veröffentlichen, zu verteilen, "
    "unterzulizenzieren und/oder Kopien der Software zu verkaufen und diese Rechte unter den "
    "folgenden Bedingungen anderen zu übertragen."
)
GERMAN_READING_IN_ENGLISH = (
    "Anyone who obtains a copy of this software and the associated documentation files is "
    "hereby granted permission, free of charge, to deal in the software without restriction. "
    "This includes in particular the right to use, copy, modify, merge, publish, distribute, "
    "sublicense and/or sell copies of the software and to transfer these rights to others "
    "under the following conditions."
)


def decoded(engine: Engine, audio: Audio, language: str, task: str) -> tuple[str, float, str]:
    """The text, the audio seconds per wall second, the languages of the segments."""
    options = EngineOptions(language=language, task=task, threads=2, word_timestamps=False)
    started = time.perf_counter()
    segments = engine.transcribe(audio, options)
    speed = audio.size / SAMPLE_RATE / (time.perf_counter() - started)
    spoken = ",".join(sorted({s.language or "?" for s in segments}))
    return " ".join(s.text for s in segments).strip(), speed, spoken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", nargs="+", default=["faster-whisper", "whispercpp"])
    args = parser.parse_args()
    if not have_espeak():
        sys.exit("espeak-ng is needed: scripts/services.sh speech")
    with tempfile.TemporaryDirectory() as folder:
        clips = [
            (s.language, s.text, s.english, decode(speak(s, Path(folder))).samples)
            for s in SENTENCES
        ]
    recording = decode(RECORDING.read_bytes()).samples[int(GERMAN_FROM_S * SAMPLE_RATE) :]
    clips.append(("de (eval, human)", GERMAN_READING, GERMAN_READING_IN_ENGLISH, recording))
    print(
        f"{'engine':15} {'speech':17} {'WER translate':>13} {'(auto)':>7} {'detected':>8} "
        f"{'WER transcribe':>14} {'x RT translate':>14} {'x RT transcribe':>15}"
    )
    for engine_name in args.engines:
        engine = create_engine(engine_name, "base")
        engine.transcribe(clips[0][3][:SAMPLE_RATE], EngineOptions(threads=2))  # warm up
        texts = []
        for label, original, english, audio in clips:
            language = label[:2]
            translated, speed_translate, _ = decoded(engine, audio, language, "translate")
            auto, _, detected = decoded(engine, audio, "auto", "translate")
            transcribed, speed_transcribe, _ = decoded(engine, audio, language, "transcribe")
            print(
                f"{engine_name:15} {label:17} {english_wer(english, translated):13.2f} "
                f"{english_wer(english, auto):7.2f} {detected:>8} "
                f"{wer(original, transcribed):14.2f} {speed_translate:14.1f} "
                f"{speed_transcribe:15.1f}",
                flush=True,
            )
            texts.append(f"  {engine_name} {label}: {translated!r}")
        engine.close()
        print("\n".join(texts))


if __name__ == "__main__":
    main()
