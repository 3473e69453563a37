"""Live accuracy against files: conversations of two or three espeak-ng voices,
run as a file and streamed in real time, WER side by side.

Each conversation alternates 2-3 voices (espeak-ng voices and variants, each with
its own pitch and speed, seeded), a sentence or two per turn, with 0.5-1.5 s of
silence between turns. Turns are placed in the audio, so where each turn's
speech ends is known exactly (espeak-ng's own leading and trailing silence is
trimmed). Each conversation is played at several noise levels (pink noise at an
SNR measured against the speech; ``clean`` has none) and run:

- as a file: the whole recording through the engine and model the live path
  uses (faster-whisper tiny.en), with the file path's options;
- live: a real-time stream on the embedded platform at the default endpointing
  settings, ``--streams`` (4) conversations at a time, started staggered,
  driven as :mod:`bench_streams` drives them (100 ms chunks over MQTT, each
  published once its time has passed).

It prints WER (file, live) per conversation and noise level, and per
configuration the WER over all of them and the final latency p50 / p95: from the
end of a turn's speech in the audio to the arrival at the subscriber of the
final that closes it (a turn followed by a pause shorter than the endpointer's
``min_silence_ms`` has no final of its own: counted as ``joined``). And how
partials hold up: the share of partial words that their final changed or
dropped (words matched in order, after normalization; words the final adds
are no change), and the first-partial latency, from the start of a turn's
speech in the audio to the first partial of it at the subscriber.

``--configs`` runs the live side once per configuration, on the same audio, in
the same run: ``default`` is the platform's defaults; ``name=value[+name=value]``
overrides settings by their flat names, e.g. ``stream_lead_s=8`` (each final
decoded after up to 8 s of the stream audio before it, the default run's
second configuration) or ``stream_context_chars=200`` (a final decoded with the
stream's earlier finals as the decoder's prompt); a ``~policy`` suffix opens the
streams with that endpointing policy (``default~fast``). Latencies are printed as
ratios against the first configuration's.

    .venv/bin/python benchmarks/bench_live_accuracy.py [--quick] [--seed 11]
        [--configs default,stream_lead_s=8] [--streams 4] [--json out.json]

The default run (4 conversations of 5 turns x 3 noise levels x 2 configurations)
took 6 minutes on 2 shared cores; ``--quick`` (2 conversations x clean / 10 dB)
about 2. The live side is real time: its length does not shrink on a faster
machine. Latency is that of the machine it ran on: compare configurations
within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_streams import Sentence, StreamRun, encoded, one_stream, pct, wer

from voxwire.audio.decoding import SAMPLE_RATE, decode
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import Platform, build
from voxwire.workers.engine import EngineOptions, Segment
from voxwire.workers.engines import create_engine
from voxwire.workers.files.skipped_speech import transcribe_heard
from voxwire_client import AsyncClient

VOICES = (
    "en-us",
    "en-us+f3",
    "en-gb+m3",
    "en-gb-scotland+f2",
    "en-029+m5",
    "en-gb-x-rp+f4",
    "en-us+klatt4",
    "en-gb-x-gbclan+m2",
)
LINES = (
    "Good morning, thanks for joining the call today.",
    "Can everyone hear me? I think my microphone was muted a minute ago.",
    "Let's start with the delivery schedule for next month.",
    "The trucks leave the warehouse on Monday and arrive by Thursday afternoon.",
    "That works for us. Do we still need the extra driver?",
    "Probably not. The second route was cancelled last week.",
    "I spoke with the supplier yesterday and they can lower the price by five percent.",
    "Only if we sign the contract before the end of the quarter.",
    "Who is going to review the contract?",
    "Maria will read it tonight and send her comments in the morning.",
    "Great. What about the new office in Denver?",
    "The lease is signed, but the furniture will not arrive until October.",
    "So people keep working from home until then.",
    "Yes, and we will pay for their internet as before.",
    "Has anyone looked at the customer survey results?",
    "Most customers are happy, but many complained about the waiting time on the phone.",
    "We could add two people to the support team in the evening.",
    "I agree. The busiest hours are between six and nine.",
    "Let me check the budget before we promise anything.",
    "The training sessions start on the fourteenth, in the small meeting room.",
    "Please send me the slides by Friday so I can print them.",
    "Does the room have a projector, or should I bring mine?",
    "There is a projector, but the cable is missing again.",
    "I will ask the building manager to buy a new one.",
    "One more thing: the fire drill is on Wednesday at ten.",
    "Everyone has to leave the building, even the people on calls.",
    "Thanks everyone. Let's meet again next Tuesday at the same time.",
    "Sounds good. Have a nice weekend.",
    "Before we finish, who took the notes today?",
    "I did. I will share them on the team page after lunch.",
)
LEVELS = ("clean", "20", "10")
"""Noise levels: none, or pink noise at this SNR in dB."""
CHUNK_MS = 100
SPREAD_S = 4.0  # streams of one round start within this many seconds


@dataclass(frozen=True)
class Conversation:
    """One conversation: clean samples, each turn's speech bounds and text."""

    name: str
    audio: np.ndarray
    turns: list[Sentence]
    refs: list[str]
    voices: list[str]


def speak(text: str, voice: str, pitch: int, speed: int, folder: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng at 16 kHz, its leading and trailing silence cut."""
    wav = folder / "say.wav"
    command = ["espeak-ng", "-v", voice, "-p", str(pitch), "-s", str(speed), "-w", str(wav), text]
    subprocess.run(command, check=True, capture_output=True)
    samples = decode(wav.read_bytes()).samples
    loud = np.flatnonzero(np.abs(samples) > 0.003)
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples


def conversations(count: int, turns: int, seed: int, folder: Path) -> list[Conversation]:
    """``count`` conversations of ``turns`` turns, 2 or 3 voices each (seeded)."""
    rng = random.Random(seed)
    made = []
    for n in range(count):
        voices = [
            (voice, rng.randrange(25, 75), rng.randrange(135, 185))
            for voice in rng.sample(VOICES, rng.choice((2, 3)))
        ]
        parts = [np.zeros(SAMPLE_RATE // 2, np.float32)]
        at, bounds, refs = len(parts[0]), [], []
        for t in range(turns):
            text = " ".join(rng.sample(LINES, rng.choice((1, 1, 2))))
            speech = speak(text, *voices[t % len(voices)], folder)
            bounds.append(Sentence(at / SAMPLE_RATE, (at + len(speech)) / SAMPLE_RATE))
            refs.append(text)
            pause = np.zeros(int(SAMPLE_RATE * rng.uniform(0.5, 1.5)), np.float32)
            parts += [speech, pause]
            at += len(speech) + len(pause)
        parts.append(np.zeros(SAMPLE_RATE, np.float32))  # the last turn's final closes
        name = f"c{n + 1} " + "/".join(v for v, _, _ in voices)
        made.append(Conversation(name, np.concatenate(parts), bounds, refs, [v for v in voices]))
    return made


def pink_noise(size: int, rng: np.random.Generator) -> np.ndarray:
    spectrum = np.fft.rfft(rng.standard_normal(size))
    spectrum /= np.sqrt(np.maximum(np.arange(spectrum.size), 1))
    noise = np.fft.irfft(spectrum, size)
    return noise / np.sqrt(np.mean(noise**2))


def noisy(conversation: Conversation, level: str, seed: int) -> np.ndarray:
    """The conversation with pink noise at ``level`` dB SNR (speech power over the turns)."""
    audio = conversation.audio
    if level == "clean":
        return audio
    speech = np.concatenate(
        [
            audio[int(t.start_s * SAMPLE_RATE) : int(t.end_s * SAMPLE_RATE)]
            for t in conversation.turns
        ]
    )
    power = float(np.mean(speech**2))
    noise = pink_noise(audio.size, np.random.default_rng(seed))
    mixed = audio + noise * np.sqrt(power / 10 ** (float(level) / 10))
    return np.clip(mixed, -1, 1).astype(np.float32)


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


@dataclass(frozen=True)
class Case:
    """One conversation at one noise level, as streamed."""

    conversation: Conversation
    level: str
    pcm: bytes

    @property
    def label(self) -> str:
        return f"{self.conversation.name} {self.level}"


def file_texts(cases: list[Case]) -> list[str]:
    """Each case's transcript as the file path makes it: the whole recording,
    the file worker's options (the server's engine settings), speech the
    decoder skipped decoded again (:mod:`voxwire.workers.files.skipped_speech`)."""
    settings = Settings().engine
    engine = create_engine("faster-whisper", settings.model)
    options = EngineOptions(
        language=settings.language,
        beam_size=settings.beam_size,
        word_timestamps=settings.word_timestamps,
    )
    texts = []
    try:
        for case in cases:
            heard: list[Segment] = []
            transcribe_heard(engine, _samples(case.pcm), options, heard.append)
            texts.append(" ".join(s.text for s in heard))
    finally:
        engine.close()
    return texts


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768


def overrides(config: str) -> dict[str, Any]:
    """Settings by flat name from ``name=value[+name=value]`` (``default``: none)."""
    if config == "default":
        return {}
    out: dict[str, Any] = {}
    for pair in config.split("+"):
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--configs: {pair!r} is not name=value")
        out[name] = value
    return out


async def live_round(
    platform: Platform, key: str, cases: list[Case], policy: str = ""
) -> list[StreamRun]:
    s = platform.settings.listen
    client = AsyncClient(f"http://127.0.0.1:{s.http_port}", key, f"mqtt://127.0.0.1:{s.mqtt_port}")
    try:
        first = asyncio.get_running_loop().time() + 1.0 + 0.05 * len(cases)
        starts = [first + i * SPREAD_S / len(cases) for i in range(len(cases))]
        sent = [encoded(c.pcm, "", policy=policy) for c in cases]
        return await asyncio.gather(
            *(one_stream(client, x, t) for x, t in zip(sent, starts, strict=True))
        )
    finally:
        await client.aclose()


async def live_on(config: str, cases: list[Case]) -> list[StreamRun]:
    """``cases`` streamed at once in real time on a platform with ``config``
    (settings, then ``~policy``: the streams' endpointing policy)."""
    config, _, policy = config.partition("~")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            http_port=0, mqtt_port=0, ws_port=0, data_dir=Path(tmp), **overrides(config)
        )
        platform = build(settings)
        key = (await platform.ensure_key()).key
        assert key is not None
        await platform.start()
        try:
            return await live_round(platform, key.plaintext, cases, policy)
        finally:
            await platform.stop()


def live(configs: list[str], cases: list[Case], streams: int) -> dict[str, list[StreamRun]]:
    """Every case streamed in real time, ``streams`` at a time, once per
    configuration; the configurations take turns round by round, so that the
    load of the machine weighs on each alike."""
    runs: dict[str, list[StreamRun]] = {config: [] for config in configs}
    for i in range(0, len(cases), streams):
        for config in configs:
            runs[config] += asyncio.run(live_on(config, cases[i : i + streams]))
            print(f"  {config}: {len(runs[config])}/{len(cases)} streams done", file=sys.stderr)
    return runs


def finals_text(run: StreamRun) -> list[str]:
    return [m.segment.text for _, m in run.finals()]


def summary(cases: list[Case], runs: list[StreamRun]) -> dict[str, Any]:
    measured = [r.final_latencies(c.conversation.turns) for c, r in zip(cases, runs, strict=True)]
    latencies = [x for lat, _ in measured for x in lat]
    refs = [" ".join(c.conversation.refs) for c in cases]
    firsts = [
        x for c, r in zip(cases, runs, strict=True) for x in r.first_partials(c.conversation.turns)
    ]
    churn = [r.partial_churn() for r in runs]
    return {
        "partial_words": sum(total for _, total in churn),
        "partial_words_changed": sum(changed for changed, _ in churn)
        / max(1, sum(total for _, total in churn)),
        "first_partial_p50_s": pct(firsts, 50),
        "first_partial_p95_s": pct(firsts, 95),
        "wer": wer(refs, [" ".join(finals_text(r)) for r in runs]),
        "per_case": [
            wer(c.conversation.refs, finals_text(r)) for c, r in zip(cases, runs, strict=True)
        ],
        "final_p50_s": pct(latencies, 50),
        "final_p95_s": pct(latencies, 95),
        "final_max_s": max(latencies, default=float("nan")),
        "turns": sum(len(c.conversation.turns) for c in cases),
        "joined": sum(m for _, m in measured),
        "split": sum(r.splits(c.conversation.turns) for c, r in zip(cases, runs, strict=True)),
        "continued": sum(r.continued() for r in runs),
        "latencies": [lat for lat, _ in measured],
        "max_lag_ms": max(r.max_lag_ms() for r in runs),
        "finals": [
            [(m.segment.start_ms, m.segment.end_ms, m.segment.text) for _, m in r.finals()]
            for r in runs
        ],
    }


def live_text(result: dict[str, Any], case: int) -> str:
    return " ".join(text for *_, text in result["finals"][case])


def report(cases: list[Case], files: list[str], results: dict[str, dict[str, Any]]) -> None:
    configs = list(results)
    file_wers = [wer(c.conversation.refs, [t]) for c, t in zip(cases, files, strict=True)]
    print(f"{len(cases)} cases, tiny.en (faster-whisper), live at the default endpointing")
    head = "".join(f"{'live ' + c:>{max(12, len(c) + 6)}}" for c in configs)
    width = max(len(c.label) for c in cases) + 2
    print(f"{'conversation / noise':<{width}}{'words':>6}{'file':>7}{head}")
    for i, case in enumerate(cases):
        words = sum(len(r.split()) for r in case.conversation.refs)
        cells = "".join(f"{results[c]['per_case'][i]:>{max(12, len(c) + 6)}.3f}" for c in configs)
        print(f"{case.label:<{width}}{words:>6}{file_wers[i]:>7.3f}{cells}")
    for level in dict.fromkeys(c.level for c in cases):
        picked = [i for i, c in enumerate(cases) if c.level == level]
        refs = [" ".join(cases[i].conversation.refs) for i in picked]
        file_w = wer(refs, [files[i] for i in picked])
        cells = "".join(
            f"{wer(refs, [live_text(results[c], i) for i in picked]):>{max(12, len(c) + 6)}.3f}"
            for c in configs
        )
        print(f"{'all at ' + level:<{width}}{'':>6}{file_w:>7.3f}{cells}")
    refs = [" ".join(c.conversation.refs) for c in cases]
    print(f"WER over everything: file {wer(refs, files):.3f}")
    base = results[configs[0]]
    for config in configs:
        r = results[config]
        print(
            f"  live {config:<32} WER {r['wer']:.3f} ({r['wer'] - wer(refs, files):+.3f} vs file)"
            f"  final p50 {r['final_p50_s']:.2f}s p95 {r['final_p95_s']:.2f}s max "
            f"{r['final_max_s']:.2f}s  ({r['final_p50_s'] / base['final_p50_s']:.2f}, "
            f"{r['final_p95_s'] / base['final_p95_s']:.2f} of {configs[0]})"
            f"  turns {r['turns']}, joined {r['joined']}, split {r['split']},"
            f" continued {r['continued']}"
        )
    print(
        "partials (words of a partial its final changed or dropped; turn start to first partial):"
    )
    for config in configs:
        r = results[config]
        print(
            f"  live {config:<32} {r['partial_words_changed']:.1%} of {r['partial_words']} words"
            f"  first partial p50 {r['first_partial_p50_s']:.2f}s p95 "
            f"{r['first_partial_p95_s']:.2f}s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 conversations, clean and 10 dB")
    parser.add_argument("--conversations", type=int, help="how many (default 4, quick 2)")
    parser.add_argument("--turns", type=int, default=5, help="turns per conversation")
    parser.add_argument(
        "--levels", help="noise levels: clean or an SNR in dB (default clean,20,10)"
    )
    parser.add_argument(
        "--configs",
        default="default,stream_lead_s=8",
        help="live configurations, see above",
    )
    parser.add_argument("--streams", type=int, default=4, help="streams at once")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path, help="also write the figures and transcripts here")
    args = parser.parse_args()
    count = args.conversations or (2 if args.quick else 4)
    levels = (args.levels or ("clean,10" if args.quick else ",".join(LEVELS))).split(",")
    for level in levels:
        if level != "clean":
            try:
                float(level)
            except ValueError:
                parser.error(f"noise level {level!r} is neither clean nor an SNR in dB")
    registry.resolve_ct2("tiny.en")
    with tempfile.TemporaryDirectory() as tmp:
        made = conversations(count, args.turns, args.seed, Path(tmp))
    cases = [
        Case(c, level, pcm16(noisy(c, level, args.seed + n)))
        for n, c in enumerate(made)
        for level in levels
    ]
    started = time.perf_counter()
    files = file_texts(cases)
    print(f"  files done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    runs = live(args.configs.split(","), cases, args.streams)
    results = {config: summary(cases, config_runs) for config, config_runs in runs.items()}
    report(cases, files, results)
    if args.json:
        out = {
            "cases": [
                {"label": c.label, "refs": c.conversation.refs, "file": f,
                 "turns": [(t.start_s, t.end_s) for t in c.conversation.turns]}
                for c, f in zip(cases, files, strict=True)
            ],
            "live": results,
        }  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
