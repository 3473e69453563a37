"""Redaction where users meet it: the spoken set's sentences said in calls, through
the embedded platform's file and live paths, scored on what a user receives.

The spoken set's sentences (evaluation/redaction/said.py, said by espeak-ng in
the voices and at the speeds of benchmarks/make_spoken_pii.py), and questions
answered by personal data in the next sentence ("can you confirm the card number
on the account?" | "yes, it is 4111 1111 1111 1111"), are joined into calls of
five turns in a seeded order, with a pause of 0.5 to 1.5 s between sentences.
Each call goes through the platform (faster-whisper tiny.en, its defaults) with
``redact`` entity twice: uploaded as a WAV file, and streamed live over MQTT in
100 ms chunks in real time (``--speed`` plays faster). So the segments are the
ones the file path's VAD and the live endpointer cut, and the context of a
number may lie in the final before its own.

What is scored is what a user receives: the finals delivered over MQTT (joined),
and, as a check, the stored transcript (``GET .../transcript``). An item is
recalled when none of its secret characters survive (evaluation/redaction/calls.py:
a number's digits and number words, an address's or email's words); an item the
engine did not write at all is counted apart (lost). A finding (a marker such as
``[CREDIT_CARD]``) is right when it lies on personal data said in the call.

    .venv/bin/python benchmarks/bench_redaction_paths.py [--quick] [--speed 1]
        [--streams 2] [--seed 7] [--missed]

``--quick`` runs a subset (20 turns in 4 calls, about 2 minutes); ``--streams``:
how many calls stream at once.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import sys
import tempfile
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.redaction.calls import Call, PathScore, calls, turns  # noqa: E402
from evaluation.redaction.said import items, speak  # noqa: E402
from evaluation.redaction.spoken import SpokenScore  # noqa: E402
from voxwire.audio.decoding import SAMPLE_RATE  # noqa: E402
from voxwire.core.config import Settings  # noqa: E402
from voxwire.platform import build  # noqa: E402
from voxwire_client import (  # noqa: E402
    AsyncClient,
    RedactMode,
    StreamRequest,
    Transcript,
    pcm_chunks,
)
from voxwire_client.messages import Message, SegmentMessage  # noqa: E402

LEAD_S, TAIL_S = 0.3, 1.0
"""Silence before a call's first sentence and after its last."""
PATHS = ("file", "live")


@dataclass
class Received:
    """What a user received of one call on one path."""

    finals: dict[int, str] = field(default_factory=dict)
    """Each final delivered over MQTT, by segment index."""
    stored: str = ""
    """The stored transcript's text."""

    def on_event(self, message: Message) -> None:
        if isinstance(message, SegmentMessage) and message.type == "final":
            self.finals[message.segment.index] = message.segment.text

    def texts(self) -> list[str]:
        return [self.finals[i] for i in sorted(self.finals)]


def audio(call: Call, folder: Path) -> np.ndarray:
    """The call's sentences said one after another, the call's pauses between them."""
    parts = [np.zeros(int(LEAD_S * SAMPLE_RATE), dtype=np.float32)]
    wav = folder / "said.wav"
    for n, take in enumerate(call.sentences()):
        parts.append(speak(take.item.sentence, take.voice, take.speed, wav))
        pause = call.pauses_s[n] if n < len(call.pauses_s) else TAIL_S
        parts.append(np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32))
    return np.concatenate(parts)


def pcm16(samples: np.ndarray) -> bytes:
    return bytes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())


def write_wav(path: Path, pcm: bytes) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm)
    return path


async def by_file(client: AsyncClient, wav: Path) -> Received:
    got = Received()
    done = await client.transcribe(wav, redact=RedactMode.ENTITY, on_event=got.on_event)
    got.stored = (await client.transcript(done.sid)).text
    return got


async def live(client: AsyncClient, pcm: bytes, speed: float) -> Received:
    got = Received()
    request = StreamRequest(redact=RedactMode.ENTITY)
    done: Transcript = await client.stream(
        pcm_chunks(pcm), request, speed=speed, on_event=got.on_event
    )
    got.stored = (await client.transcript(done.sid)).text
    return got


async def run_paths(
    pcms: list[bytes], wavs: list[Path], speed: float, streams: int, data: Path
) -> dict[str, list[Received]]:
    """Every call through the file path (uploads four at a time), then live
    (``streams`` at a time), on one embedded platform."""
    settings = Settings(http_port=0, mqtt_port=0, ws_port=0, data_dir=data)
    platform = build(settings)
    key = (await platform.ensure_key()).key
    assert key is not None
    await platform.start()
    listen = platform.settings.listen
    client = AsyncClient(
        f"http://127.0.0.1:{listen.http_port}",
        key.plaintext,
        f"mqtt://127.0.0.1:{listen.mqtt_port}",
        timeout=300,
    )
    received: dict[str, list[Received]] = {}
    try:
        uploads, streaming = asyncio.Semaphore(4), asyncio.Semaphore(streams)

        async def upload(wav: Path) -> Received:
            async with uploads:
                return await by_file(client, wav)

        async def stream(pcm: bytes) -> Received:
            async with streaming:
                return await live(client, pcm, speed)

        for path, runs in (("file", map(upload, wavs)), ("live", map(stream, pcms))):
            started = time.perf_counter()
            received[path] = list(await asyncio.gather(*runs))
            print(f"  {path}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        await client.aclose()
        await platform.stop()
    return received


def scores(said: list[Call], received: list[Received]) -> tuple[PathScore, PathScore]:
    """(of the finals delivered, of the stored transcripts)."""
    delivered, stored = PathScore(), PathScore()
    for call, got in zip(said, received, strict=True):
        finals = got.texts()
        delivered.add(call, " ".join(finals), finals)
        stored.add(call, got.stored)
    return delivered, stored


def report(scored: dict[str, tuple[PathScore, PathScore]], said: list[Call]) -> None:
    sentences = sum(len(c.sentences()) for c in said)
    print(f"\n{len(said)} calls, {sentences} sentences; finals delivered, per entity:")
    print(f"{'':<16}" + "".join(f"{path:<30}" for path in PATHS))
    columns = f"{'items':>6}{'recall':>7}{'found':>6}{'precision':>10} "
    print(f"{'entity':<16}" + columns * len(PATHS))
    paths = [scored[p][0] for p in PATHS]
    for entity in sorted({e for s in paths for e in s.by_entity}):
        row = [s.by_entity.get(entity) for s in paths]
        print(f"{entity:<16}" + "".join(_cells(t) for t in row))
    print(f"{'all':<16}" + "".join(_cells(s.total) for s in paths))
    print(
        f"{'after a question':<16}"
        + "".join(f"{s.prompted.items:>6}{s.prompted.recall:>7.2f}{'':>17}" for s in paths)
    )
    for path, (delivered, stored) in scored.items():
        print(
            f"{path}: lost by the engine {delivered.lost}, unplaced {len(delivered.unplaced)}, "
            f"answers in a final after their question's {delivered.apart} of "
            f"{delivered.prompted.items}; stored transcripts: "
            f"recall {stored.total.recall:.2f} ({stored.total.items} items), precision "
            f"{stored.total.precision:.2f} ({stored.total.findings} findings)"
        )


def _cells(s: SpokenScore | None) -> str:
    if s is None:
        return f"{'-':>6}{'-':>7}{'-':>6}{'-':>10} "
    recall = f"{s.recall:.2f}" if s.items else "-"
    precision = f"{s.precision:.2f}" if s.findings else "-"
    return f"{s.items:>6}{recall:>7}{s.findings:>6}{precision:>10} "


def missed(scored: dict[str, tuple[PathScore, PathScore]]) -> None:
    for path, (delivered, _) in scored.items():
        for placed, text in delivered.missed:
            item = placed.turn.take.item
            print(f"  {path} missed {item.entity:<15} {text[:100]!r}")
            print(f"  {'':<4} {'said':<22} {item.said[:100]!r}")
        for text in delivered.unplaced:
            print(f"  {path} unplaced {text[:100]!r}")
        for text in delivered.wrong:
            print(f"  {path} wrong {text!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a subset: 4 calls, ~2 minutes")
    parser.add_argument("--speed", type=float, default=1.0, help="live: times real time")
    parser.add_argument("--streams", type=int, default=2, help="live streams at once")
    parser.add_argument("--seed", type=int, default=7, help="the calls' order and pauses")
    parser.add_argument("--missed", action="store_true", help="print the items not hidden")
    args = parser.parse_args()
    said = turns(items())
    if args.quick:  # every tenth take of the spoken set, each question once
        asked = [turn for turn in said if turn.question is not None]
        said = [turn for turn in said if turn.question is None][::10] + asked[::2]
    rng = random.Random(args.seed)
    made = calls(said, rng)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "data").mkdir()
        pcms = [pcm16(audio(call, folder)) for call in made]
        wavs = [write_wav(folder / f"call-{n}.wav", pcm) for n, pcm in enumerate(pcms)]
        seconds = sum(len(p) for p in pcms) / 2 / SAMPLE_RATE
        print(f"{len(made)} calls, {seconds:.0f} s of audio", file=sys.stderr)
        received = asyncio.run(run_paths(pcms, wavs, args.speed, args.streams, folder / "data"))
    scored = {path: scores(made, received[path]) for path in PATHS}
    report(scored, made)
    if args.missed:
        missed(scored)
    print(f"audio {seconds:.0f} s; live at {args.speed:g}x real time, {args.streams} at once")
    print(
        "command: .venv/bin/python benchmarks/"
        + shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
