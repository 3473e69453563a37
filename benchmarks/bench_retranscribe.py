"""Live latency while a re-transcription runs, against none and against the same
work as an ordinary upload, in one run on the embedded platform.

A long session is uploaded and transcribed first (the six eval utterances of
``bench_streams.py`` joined, ``--repeat`` times: about 36 s each). Then, per
round, one real-time live stream plays those utterances over MQTT (100 ms
chunks, each sent once its time has passed), with:

- ``alone``: nothing else running;
- ``retranscribe``: that session being transcribed again (the low-priority
  lane), under way when the stream opens;
- ``upload``: the same audio uploaded as a new file (the ordinary lane),
  under way when the stream opens: what a re-transcription would cost the
  stream without its lane.

Final latency is measured as in ``bench_streams.py``: from the end of each
sentence's speech to the final at the subscriber. It prints p50 / p95 / max
per round, the ratio of each to ``alone``, and when the background work ended
(seconds after the stream's last chunk). Rounds alternate ``--rounds`` times.

    .venv/bin/python benchmarks/bench_retranscribe.py [--rounds 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path

from bench_streams import (
    Sentence,
    StreamRun,
    align,
    encoded,
    joined,
    one_stream,
    pct,
    utterances,
)

from voxwire.core.config import Settings
from voxwire.platform import build
from voxwire_client import AsyncClient
from voxwire_client.messages import Message, ProgressMessage, SessionStatus, is_terminal

ROUNDS = ("alone", "retranscribe", "upload")


def write_wav(path: Path, pcm: bytes) -> Path:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16_000)
        wav.writeframes(pcm)
    return path


async def until_running(events: asyncio.Queue[Message]) -> None:
    """Wait for the background work's first ``transcribing`` progress."""
    while True:
        message = await events.get()
        if isinstance(message, ProgressMessage) and message.status is SessionStatus.TRANSCRIBING:
            return


async def drain(
    source: AsyncIterator[Message], events: asyncio.Queue[Message], ended: list[float]
) -> None:
    async for message in source:
        events.put_nowait(message)
        if is_terminal(message):
            ended.append(time.time())


async def one_round(
    client: AsyncClient, kind: str, stored: str, wav: Path, sent: tuple, sentences: list[Sentence]
) -> dict[str, float]:
    events: asyncio.Queue[Message] = asyncio.Queue()
    ended: list[float] = []
    background = None
    if kind == "retranscribe":
        accepted = await client.retranscribe(stored)
        background = asyncio.create_task(drain(client.version_events(accepted), events, ended))
    elif kind == "upload":
        created = await client.upload(wav)
        background = asyncio.create_task(drain(client.events(created.sid), events, ended))
    if background is not None:
        await until_running(events)
    start_at = asyncio.get_running_loop().time() + 0.5
    run: StreamRun = await one_stream(client, sent, start_at)
    stream_end = run.started + len(sent[0]) * sent[1] / 1000
    if background is not None:
        await background
    latencies, missed = run.final_latencies(sentences)
    return {
        "p50": pct(latencies, 50),
        "p95": pct(latencies, 95),
        "max": max(latencies, default=float("nan")),
        "missed": missed,
        "background_end_s": (ended[0] - stream_end) if ended else float("nan"),
    }


async def main_async(rounds: int, repeat: int) -> dict[str, list[dict[str, float]]]:
    audio, _ = utterances()
    sentences = align(audio)
    pcm = joined(audio)
    sent = encoded(pcm, "")
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in ROUNDS}
    with tempfile.TemporaryDirectory() as tmp:
        wav = write_wav(Path(tmp) / "long.wav", pcm * repeat)
        settings = Settings(http_port=0, mqtt_port=0, ws_port=0, data_dir=Path(tmp) / "data")
        platform = build(settings)
        key = (await platform.ensure_key()).key
        assert key is not None
        await platform.start()
        listen = platform.settings.listen
        client = AsyncClient(
            f"http://127.0.0.1:{listen.http_port}",
            key.plaintext,
            f"mqtt://127.0.0.1:{listen.mqtt_port}",
        )
        try:
            stored = (await client.upload(wav)).sid
            await client.follow(stored)
            for n in range(rounds):
                for kind in ROUNDS:
                    row = await one_round(client, kind, stored, wav, sent, sentences)
                    results[kind].append(row)
                    print(f"  round {n + 1} {kind}: {row}", file=sys.stderr)
        finally:
            await client.aclose()
            await platform.stop()
    return results


def report(results: dict[str, list[dict[str, float]]], repeat: int) -> None:
    def mean(kind: str, field: str) -> float:
        values = [r[field] for r in results[kind]]
        return sum(values) / len(values)

    base = {f: mean("alone", f) for f in ("p50", "p95")}
    print(f"\none live stream (36 s, 6 sentences) beside {36 * repeat} s of background audio;")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| beside the stream | final p50 / p95 / max (s) | vs alone p50 / p95 | "
          "missed | background ended (s after the stream) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for kind in ROUNDS:
        p50, p95, top = mean(kind, "p50"), mean(kind, "p95"), mean(kind, "max")
        ended = mean(kind, "background_end_s")
        print(
            f"| {kind} | {p50:.2f} / {p95:.2f} / {top:.2f} | "
            f"{p50 / base['p50']:.2f} / {p95 / base['p95']:.2f} | "
            f"{sum(r['missed'] for r in results[kind]):.0f} | "
            f"{'' if ended != ended else f'{ended:+.1f}'} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="the background audio: 36 s times")
    args = parser.parse_args()
    report(asyncio.run(main_async(args.rounds, args.repeat)), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
