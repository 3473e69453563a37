"""Live streams: 1 to 16 concurrent real-time streams on the embedded platform, per engine.

Each stream plays six eval utterances with 1 s of silence after each (about
36 s of audio) in real time over MQTT, as a device would, in 100 ms chunks; the
streams start staggered so their pauses do not line up. Per level it prints:

- final latency p50/p95: the end of a segment's speech (stream start + the
  final's ``end_ms``) -> the final received by the stream's MQTT subscriber;
  it includes the ``min_silence_ms`` (600 ms) the endpointer waits for;
- first partial: the start of a segment's speech -> its first partial received;
- lag: the largest ``lag_ms`` the worker reported on progress;
- CPU: this process's CPU time over the wall time (the platform runs in it;
  200% is both cores);
- WER per stream (mean and worst) next to the offline engine's WER on the
  same utterances, measured in this run;
- queue p50: how long a final waited for the engine once decided; early: the
  share of finals sent with their likely final's text (no transcription
  after the pause).

    .venv/bin/python benchmarks/bench_streams.py [--streams 1,2,4,8,16]
        [--engines whispercpp,faster-whisper,faster-whisper:1] [--json out.json]

``faster-whisper`` batches the finals waiting in several sessions into one
engine call (``batch_finals`` = 8); ``faster-whisper:1`` is the same engine
without batching, the baseline for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jiwer
import numpy as np
from whisper_normalizer.english import EnglishTextNormalizer

from voxwire.core.audio import decode
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import Platform, build
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire_client import AsyncClient, StreamRequest, pcm_chunks
from voxwire_client.messages import Message, ProgressMessage, SegmentMessage

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
UTTERANCES = [
    "lhotse_lj_LJ002-0020",
    "pocketsphinx_librivox_0880",
    "mfa_thoughts",
    "leopard_ls_1272-128104-0000",
    "wenet_ls_1995-1837-0001",
    "pocketsphinx_librivox_0930",
]
CHUNK_MS = 100
_normalize = EnglishTextNormalizer()


def wer(refs: list[str], hyps: list[str]) -> float:
    return float(jiwer.wer(" ".join(map(_normalize, refs)), " ".join(map(_normalize, hyps))))


def utterances() -> tuple[list[np.ndarray], list[str]]:
    rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    audio = [decode((EVAL / by_id[u]["audio"]).read_bytes()).samples for u in UTTERANCES]
    return audio, [str(by_id[u]["text"]) for u in UTTERANCES]


def joined(audio: list[np.ndarray]) -> bytes:
    silence = np.zeros(16000, dtype=np.float32)
    samples = np.concatenate([part for a in audio for part in (a, silence)])
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


@dataclass
class StreamRun:
    """What one stream's subscriber saw, with arrival times."""

    started: float = 0.0
    events: list[tuple[float, Message]] = field(default_factory=list)

    def finals(self) -> list[tuple[float, SegmentMessage]]:
        return [
            (t, m) for t, m in self.events if isinstance(m, SegmentMessage) and m.type == "final"
        ]

    def final_latencies(self) -> list[float]:
        return [t - (self.started + m.segment.end_ms / 1000) for t, m in self.finals()]

    def breakdown(self) -> list[tuple[int, int]]:
        """(queue_ms, transcribe_ms) of each final (transcribe 0: the likely final's text)."""
        return [
            (m.latency.queue_ms, m.latency.transcribe_ms)
            for _, m in self.finals()
            if m.latency is not None
        ]

    def first_partials(self) -> list[float]:
        firsts: dict[int, float] = {}
        for t, m in self.events:
            if isinstance(m, SegmentMessage) and m.type == "partial":
                start = self.started + m.segment.start_ms / 1000
                firsts.setdefault(m.segment.index, t - start)
        return list(firsts.values())

    def max_lag_ms(self) -> int:
        lags = [m.lag_ms or 0 for _, m in self.events if isinstance(m, ProgressMessage)]
        return max(lags, default=0)


async def one_stream(client: AsyncClient, pcm: bytes, delay: float) -> StreamRun:
    """Play ``pcm`` in real time as a device does (the SDK's ``stream``, timed here)."""
    await asyncio.sleep(delay)
    run = StreamRun()
    created = await client.start_stream(StreamRequest())
    following = asyncio.create_task(
        client.follow(created.sid, on_event=lambda m: run.events.append((time.time(), m)))
    )
    while created.sid not in client.subscriptions:
        await asyncio.sleep(0.01)
    subscription = client.subscriptions[created.sid]
    loop = asyncio.get_running_loop()
    run.started, started = time.time(), loop.time()
    for n, chunk in enumerate(pcm_chunks(pcm, chunk_ms=CHUNK_MS)):
        await asyncio.sleep(max(0.0, started + n * CHUNK_MS / 1000 - loop.time()))
        subscription.publish(f"{created.audio_topic}/{n}", chunk)
    subscription.publish(created.control_topic, b'{"type": "end"}')
    await following
    return run


async def level(platform: Platform, key: str, pcm: bytes, count: int) -> list[StreamRun]:
    s = platform.settings.listen
    client = AsyncClient(f"http://127.0.0.1:{s.http_port}", key, f"mqtt://127.0.0.1:{s.mqtt_port}")
    try:
        stagger = 7.0 / count  # spread the streams over one utterance's length
        return await asyncio.gather(*(one_stream(client, pcm, i * stagger) for i in range(count)))
    finally:
        await client.aclose()


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def bench(
    counts: list[int], config: str, model: str, data_dir: Path
) -> list[dict[str, float]]:
    audio, refs = utterances()
    pcm = joined(audio)
    engine, _, batch = config.partition(":")
    settings = Settings(
        http_port=0,
        mqtt_port=0,
        ws_port=0,
        data_dir=data_dir,
        engine=engine,
        model=model,
        batch_finals=int(batch or 8),
    )
    platform = build(settings)
    key = (await platform.ensure_key()).key
    assert key is not None
    await platform.start()
    rows = []
    try:
        for count in counts:
            cpu, wall = time.process_time(), time.perf_counter()
            runs = await level(platform, key.plaintext, pcm, count)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            latencies = [x for r in runs for x in r.final_latencies()]
            partials = [x for r in runs for x in r.first_partials()]
            wers = [wer(refs, [m.segment.text for _, m in r.finals()]) for r in runs]
            breakdown = [x for r in runs for x in r.breakdown()]
            rows.append(
                {
                    "streams": count,
                    "finals": len(latencies),
                    "final_p50_s": pct(latencies, 50),
                    "final_p95_s": pct(latencies, 95),
                    "first_partial_p50_s": pct(partials, 50),
                    "max_lag_ms": max(r.max_lag_ms() for r in runs),
                    "cpu_percent": 100 * cpu / wall,
                    "final_queue_p50_ms": pct([q for q, _ in breakdown], 50),
                    "finals_from_likely": sum(1 for _, t in breakdown if t == 0)
                    / max(1, len(breakdown)),
                    "wer_mean": statistics.fmean(wers),
                    "wer_max": max(wers),
                }
            )
            print(f"  {config}: {count} streams done in {wall:.0f} s", file=sys.stderr)
    finally:
        await platform.stop()
    return rows


def offline_wer(model: str) -> float:
    audio, refs = utterances()
    engine = create_engine("whispercpp", model)
    try:
        hyps = [
            " ".join(
                s.text
                for s in engine.transcribe(a, EngineOptions(threads=Settings().engine.threads))
            )
            for a in audio
        ]
    finally:
        engine.close()
    return wer(refs, hyps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,2,4,8,16", help="concurrency levels")
    parser.add_argument(
        "--engines",
        default="whispercpp,faster-whisper,faster-whisper:1",
        help="engine[:batch_finals] per run; faster-whisper batches finals (8) unless :1",
    )
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    counts = [int(c) for c in args.streams.split(",")]
    registry.resolve(args.model)  # build the ggml file first if needed
    offline = offline_wer(args.model)
    results = {}
    for config in args.engines.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            results[config] = asyncio.run(bench(counts, config, args.model, Path(tmp)))
    print(f"{len(UTTERANCES)} utterances + 1 s pauses per stream, real time, model {args.model}")
    print(
        f"{'engine':<18}{'streams':>8}{'finals':>8}{'final p50':>11}{'p95':>8}"
        f"{'1st partial':>13}{'max lag':>9}{'CPU':>7}{'WER mean':>10}{'max':>7}"
        f"{'queue p50':>11}{'early':>7}"
    )
    for config, rows in results.items():
        for r in rows:
            print(
                f"{config:<18}{r['streams']:>8.0f}{r['finals']:>8.0f}{r['final_p50_s']:>10.2f}s"
                f"{r['final_p95_s']:>7.2f}s{r['first_partial_p50_s']:>12.2f}s"
                f"{r['max_lag_ms'] / 1000:>8.1f}s{r['cpu_percent']:>6.0f}%"
                f"{r['wer_mean']:>10.3f}{r['wer_max']:>7.3f}"
                f"{r['final_queue_p50_ms'] / 1000:>10.2f}s{100 * r['finals_from_likely']:>6.0f}%"
            )
    print(f"offline WER (whisper.cpp) on the same utterances: {offline:.3f}")
    print("targets at 4 streams: final p50 <= 1.0 s, p95 <= 2.0 s, WER within 0.02 of offline")
    if args.json:
        args.json.write_text(json.dumps({"offline_wer": offline, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
