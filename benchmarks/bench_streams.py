"""Live streams under the load users bring: 1 to 16 real-time streams on the embedded
platform, started staggered, together or at random offsets.

Each stream plays six eval utterances with 1 s of silence after each (about
36 s of audio) in real time over MQTT, as a device does: 100 ms chunks, each
published once its 100 ms have passed. Start modes:

- ``staggered``: stream i starts i * 7 s / N after the first, so that pauses
  do not line up (the kindest load);
- ``together``: every stream starts at the same instant with the same audio,
  so every pause, and every final, coincides (a meeting bridge, a classroom);
- ``random``: independent offsets drawn uniformly from [0, 7 s) (``--seed``).

Latency is measured where the user stands: from the end of each sentence's
speech in the audio (its last word's end, by a forced alignment of the
utterance with faster-whisper word timestamps, made once per run and printed)
to the arrival, at the stream's MQTT subscriber, of the final that closes the
sentence. It includes the endpointer's ``min_silence_ms`` wait (600 ms). Per
mode and level it prints:

- final latency p50 / p95 / max, and sentences with no final (missed);
- first partial: the start of a sentence's speech -> its first partial;
- lag: the largest ``lag_ms`` the worker reported on progress;
- CPU: this process's CPU time over the wall time (the platform runs in it;
  200% is both cores), and each core's busy share over the level (the whole
  machine, as ``psutil`` sees it);
- engine busy: engine time on live streams over wall time, per stream engine;
- final wait p50 / p95: how long a decided final waited for an engine;
- partials transcribed / superseded / preempted, and likely finals sent early as
  the final (policy fast) / used by their final after the full pause / decoded
  (the worker's metrics);
- WER per stream (mean and worst) next to the offline engine's WER on the same
  utterances, measured in this run.

It ends with the largest level held at p95 <= 2.0 s per mode.

    .venv/bin/python benchmarks/bench_streams.py [--modes staggered,together,random]
        [--streams 1,2,4,8,16] [--engines faster-whisper,faster-whisper@1,whispercpp]
        [--seed 7] [--json out.json]

``faster-whisper:8`` batches the finals waiting in up to 8 sessions into one
engine call (``batch_finals``); ``faster-whisper@1`` serves live streams with
one engine instead of one per core (``stream_engines``), the baseline the
default run compares with: the first configuration's latencies are printed as
ratios against each other's. A ``/opus<bitrate>`` suffix streams Opus packets
of 100 ms at that bitrate instead of PCM16 (``kbit/s`` shows what was sent):
``--engines faster-whisper,faster-whisper/opus16000,faster-whisper/opus24000``.
A ``~policy`` suffix opens the streams with that endpointing policy (``fast``,
``balanced``, ``patient``; balanced by default): the default run compares the
fast policy with balanced. For each it also counts the finals marked
``continues`` (the speaker went on after an early final) and the sentences
split in two (a final that ends inside a sentence's speech, 0.3 s or more
before its last word ends). A ``+name=value`` suffix (after the rest) sets any
setting by its flat name: ``--engines faster-whisper,faster-whisper+live_window_s=10``.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jiwer
import numpy as np
import psutil
from prometheus_client import REGISTRY
from whisper_normalizer.english import EnglishTextNormalizer

from voxwire.audio.codecs import opus_packets
from voxwire.audio.decoding import decode, pcm16le_to_float32
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import Platform, build
from voxwire.platform.roles import cpu_cores, stream_engines
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire_client import (
    AsyncClient,
    AudioCodec,
    Endpointing,
    EndpointingPolicy,
    StreamRequest,
    pcm_chunks,
)
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
PAUSE_S = 1.0
SPREAD_S = 7.0  # staggered and random offsets fall within one utterance's length
HELD_P95_S = 2.0
MODES = ("staggered", "together", "random")
PARTIAL_OUTCOMES = ("transcribed", "superseded", "preempted")
_normalize = EnglishTextNormalizer()


def wer(refs: list[str], hyps: list[str]) -> float:
    return float(jiwer.wer(" ".join(map(_normalize, refs)), " ".join(map(_normalize, hyps))))


def _words(text: str) -> list[str]:
    return _normalize(text).split()


@dataclass(frozen=True)
class Sentence:
    """Where an utterance's speech starts and ends in the stream's audio, in seconds."""

    start_s: float
    end_s: float


def utterances() -> tuple[list[np.ndarray], list[str]]:
    rows = [json.loads(line) for line in (EVAL / "manifest.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    audio = [decode((EVAL / by_id[u]["audio"]).read_bytes()).samples for u in UTTERANCES]
    return audio, [str(by_id[u]["text"]) for u in UTTERANCES]


def align(audio: list[np.ndarray]) -> list[Sentence]:
    """Each utterance's first word start and last word end, placed in the joined audio."""
    from faster_whisper import WhisperModel  # type: ignore[import-untyped]

    model = WhisperModel(str(registry.resolve_ct2("tiny.en")), device="cpu", compute_type="int8")
    sentences, offset = [], 0.0
    for samples in audio:
        segments, _ = model.transcribe(samples, language="en", word_timestamps=True)
        words = [w for s in segments for w in (s.words or [])]
        sentences.append(Sentence(offset + words[0].start, offset + words[-1].end))
        offset += len(samples) / 16000 + PAUSE_S
    return sentences


def joined(audio: list[np.ndarray]) -> bytes:
    silence = np.zeros(int(16000 * PAUSE_S), dtype=np.float32)
    samples = np.concatenate([part for a in audio for part in (a, silence)])
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


@dataclass
class StreamRun:
    """What one stream's subscriber saw, with arrival times (wall clock)."""

    started: float = 0.0
    """When the stream's audio began, as the speaker speaks it."""
    events: list[tuple[float, Message]] = field(default_factory=list)

    def finals(self) -> list[tuple[float, SegmentMessage]]:
        return [
            (t, m) for t, m in self.events if isinstance(m, SegmentMessage) and m.type == "final"
        ]

    def final_latencies(self, sentences: list[Sentence]) -> tuple[list[float], int]:
        """Per sentence, its speech end -> the final that closes it; and how many
        sentences had none. The closing final is the last one that ends between
        the sentence's last word and the next sentence's first."""
        latencies, missed = [], 0
        finals = self.finals()
        for i, sentence in enumerate(sentences):
            until = sentences[i + 1].start_s if i + 1 < len(sentences) else float("inf")
            closing = [
                t for t, m in finals if sentence.end_s - 0.3 <= m.segment.end_ms / 1000 < until
            ]
            if closing:
                latencies.append(max(closing) - (self.started + sentence.end_s))
            else:
                missed += 1
        return latencies, missed

    def splits(self, sentences: list[Sentence]) -> int:
        """Finals that end inside a sentence's speech: the sentence was cut in two."""
        return sum(
            1
            for _, m in self.finals()
            for sentence in sentences
            if sentence.start_s < m.segment.end_ms / 1000 < sentence.end_s - 0.3
        )

    def continued(self) -> int:
        """Finals that go on with the utterance of the final before (after an early one)."""
        return sum(1 for _, m in self.finals() if m.segment.continues)

    def waits(self) -> list[int]:
        """How long each final waited for the engine once decided, in ms."""
        return [m.latency.queue_ms for _, m in self.finals() if m.latency is not None]

    def first_partials(self, sentences: list[Sentence]) -> list[float]:
        """Per sentence that got a partial: the start of its speech -> the first
        partial after it whose segment overlaps it."""
        partials = [
            (t, m.segment)
            for t, m in self.events
            if isinstance(m, SegmentMessage) and m.type == "partial"
        ]
        out = []
        for sentence in sentences:
            began = self.started + sentence.start_s
            times = [
                t
                for t, segment in partials
                if t >= began
                and segment.start_ms / 1000 < sentence.end_s
                and segment.end_ms / 1000 > sentence.start_s
            ]
            if times:
                out.append(min(times) - began)
        return out

    def partial_churn(self) -> tuple[int, int]:
        """(partial words that their final changed or dropped, partial words): each
        partial's words (normalized) against its final's, matched in order, so
        words the final adds at the end are no change."""
        finals = {m.segment.id: _words(m.segment.text) for _, m in self.finals()}
        changed = total = 0
        for _, m in self.events:
            if not (isinstance(m, SegmentMessage) and m.type == "partial"):
                continue
            final = finals.get(m.segment.id)
            words = _words(m.segment.text)
            if final is None or not words:
                continue
            kept = difflib.SequenceMatcher(a=words, b=final, autojunk=False).get_matching_blocks()
            changed += len(words) - sum(block.size for block in kept)
            total += len(words)
        return changed, total

    def max_lag_ms(self) -> int:
        lags = [m.lag_ms or 0 for _, m in self.events if isinstance(m, ProgressMessage)]
        return max(lags, default=0)


def offsets(mode: str, count: int, rng: random.Random) -> list[float]:
    if mode == "together":
        return [0.0] * count
    if mode == "random":
        return [rng.uniform(0, SPREAD_S) for _ in range(count)]
    return [i * SPREAD_S / count for i in range(count)]


def encoded(
    pcm: bytes, codec: str, frame_ms: int = CHUNK_MS, policy: str = ""
) -> tuple[list[bytes], int, StreamRequest]:
    """The chunks a device sends, their duration in ms and the stream request:
    PCM16 in 100 ms chunks, or for ``opus<bitrate>`` Opus packets of ``frame_ms``;
    with the endpointing ``policy`` (empty: the platform's default)."""
    endpointing = Endpointing(policy=EndpointingPolicy(policy)) if policy else Endpointing()
    if not codec:
        request = StreamRequest(endpointing=endpointing)
        return list(pcm_chunks(pcm, chunk_ms=CHUNK_MS)), CHUNK_MS, request
    bitrate = int(codec.removeprefix("opus"))
    samples = pcm16le_to_float32(pcm)
    packets = list(opus_packets(samples, bitrate=bitrate, frame_ms=frame_ms))
    request = StreamRequest(codec=AudioCodec.OPUS, frame_ms=frame_ms, endpointing=endpointing)
    return packets, frame_ms, request


async def one_stream(
    client: AsyncClient, sent: tuple[list[bytes], int, StreamRequest], start_at: float
) -> StreamRun:
    """Open a stream, then play its chunks in real time from ``start_at`` (loop time)."""
    run = StreamRun()
    chunks, chunk_ms, request = sent
    created = await client.start_stream(request)
    following = asyncio.create_task(
        client.follow(created.sid, on_event=lambda m: run.events.append((time.time(), m)))
    )
    while created.sid not in client.subscriptions:
        await asyncio.sleep(0.01)
    subscription = client.subscriptions[created.sid]
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start_at - loop.time()))
    run.started = time.time() - (loop.time() - start_at)
    for n, chunk in enumerate(chunks):
        # chunk n holds [n, n + 1) * 100 ms: a device has it once that time has passed
        await asyncio.sleep(max(0.0, start_at + (n + 1) * chunk_ms / 1000 - loop.time()))
        subscription.publish(f"{created.audio_topic}/{n}", chunk)
    subscription.publish(created.control_topic, b'{"type": "end"}')
    await following
    return run


async def level(
    platform: Platform, key: str, sent: tuple[list[bytes], int, StreamRequest], starts: list[float]
) -> list[StreamRun]:
    s = platform.settings.listen
    client = AsyncClient(f"http://127.0.0.1:{s.http_port}", key, f"mqtt://127.0.0.1:{s.mqtt_port}")
    try:
        first = asyncio.get_running_loop().time() + 1.0 + 0.05 * len(starts)  # streams open first
        return await asyncio.gather(*(one_stream(client, sent, first + x) for x in starts))
    finally:
        await client.aclose()


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counters() -> dict[str, float]:
    partials = "voxwire_stream_partials_total"
    out = {f"partials_{o}": metric(partials, outcome=o) for o in PARTIAL_OUTCOMES}
    kinds = ("final", "likely_final", "partial")
    out["engine_s"] = sum(metric("voxwire_stream_engine_seconds_total", kind=k) for k in kinds)
    out["likely_decoded"] = metric("voxwire_stream_engine_calls_total", kind="likely_final")
    out["likely_used"] = metric("voxwire_stream_finals_total", how="likely")
    out["likely_early"] = metric("voxwire_stream_finals_total", how="early")
    return out


@dataclass
class Run:
    """One benchmark run's inputs."""

    pcm: bytes
    refs: list[str]
    sentences: list[Sentence]
    seed: int


async def bench(
    counts: list[int], modes: list[str], config: str, run: Run, *, frame_ms: int = CHUNK_MS
) -> list[dict]:
    """Each level of each mode on one platform; ``frame_ms``: the Opus packets' length."""
    config, *overrides = config.split("+")
    config, _, policy = config.partition("~")
    config, _, codec = config.partition("/")
    sent = encoded(run.pcm, codec, frame_ms, policy)
    rest, _, engines = config.partition("@")
    engine, _, batch = rest.partition(":")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            http_port=0, mqtt_port=0, ws_port=0, data_dir=Path(tmp), engine=engine,
            batch_finals=int(batch or 1), stream_engines=int(engines or 0),
            **dict(override.split("=", 1) for override in overrides),
        )  # fmt: skip
        platform = build(settings)
        key = (await platform.ensure_key()).key
        assert key is not None
        await platform.start()
        try:
            rows = []
            for mode in modes:
                rng = random.Random(run.seed)
                for count in counts:
                    starts = offsets(mode, count, rng)
                    row = await one_level(platform, key.plaintext, run, sent, starts)
                    rows.append({"mode": mode, "streams": count, **row})
                    print(f"  {config} {mode}: {count} streams done", file=sys.stderr)
        finally:
            await platform.stop()
    return rows


async def one_level(
    platform: Platform,
    key: str,
    run: Run,
    sent: tuple[list[bytes], int, StreamRequest],
    starts: list[float],
) -> dict:
    before = counters()
    engines = min(len(stream_engines(platform.settings)), cpu_cores())  # at most this many at once
    psutil.cpu_percent(percpu=True)
    cpu, wall = time.process_time(), time.perf_counter()
    runs = await level(platform, key, sent, starts)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    cores = psutil.cpu_percent(percpu=True)
    after = counters()
    measured = [r.final_latencies(run.sentences) for r in runs]
    latencies = [x for lat, _ in measured for x in lat]
    waits = [w for r in runs for w in r.waits()]
    return {
        "kbit_s": sum(map(len, sent[0])) * 8 / (len(sent[0]) * sent[1]),
        "sentences": len(run.sentences) * len(runs),
        "missed": sum(m for _, m in measured),
        "split": sum(r.splits(run.sentences) for r in runs),
        "continued": sum(r.continued() for r in runs),
        "final_p50_s": pct(latencies, 50),
        "final_p95_s": pct(latencies, 95),
        "final_max_s": max(latencies, default=float("nan")),
        "first_partial_p50_s": pct([x for r in runs for x in r.first_partials(run.sentences)], 50),
        "max_lag_ms": max(r.max_lag_ms() for r in runs),
        "cpu_percent": 100 * cpu / wall,
        "core_busy_percent": cores,
        "engine_busy": (after["engine_s"] - before["engine_s"]) / wall / engines,
        "final_wait_p50_ms": pct(waits, 50),
        "final_wait_p95_ms": pct(waits, 95),
        **{k: after[k] - before[k] for k in after if k.startswith(("partials_", "likely_"))},
        "wer": [wer(run.refs, [m.segment.text for _, m in r.finals()]) for r in runs],
    }


def offline_wer(audio: list[np.ndarray], refs: list[str]) -> float:
    engine = create_engine("faster-whisper", "tiny.en")
    options = EngineOptions()
    try:
        hyps = [" ".join(s.text for s in engine.transcribe(a, options)) for a in audio]
    finally:
        engine.close()
    return wer(refs, hyps)


def report(results: dict[str, list[dict]], offline: float, sentences: list[Sentence]) -> None:
    bounds = ", ".join(f"{s.start_s:.2f}-{s.end_s:.2f}" for s in sentences)
    print(f"{len(UTTERANCES)} utterances + {PAUSE_S:.0f} s pauses per stream, real time, tiny.en")
    print(f"speech (s, aligned): {bounds}")
    print(
        f"{'engine':<26}{'mode':<10}{'streams':>7}{'final p50':>10}{'p95':>7}{'max':>7}"
        f"{'missed':>7}{'1st part':>9}{'lag':>6}{'CPU':>6}{'cores':>10}{'engine':>7}"
        f"{'wait p50':>9}{'p95':>7}{'partials t/s/p':>16}{'likely e/u/d':>13}{'WER':>7}{'max':>6}"
        f"{'kbit/s':>7}{'split':>6}{'cont':>5}"
    )
    for config, rows in results.items():
        for r in rows:
            cores = "/".join(f"{c:.0f}" for c in r["core_busy_percent"])
            partials = "/".join(f"{r[f'partials_{o}']:.0f}" for o in PARTIAL_OUTCOMES)
            likely = f"{r['likely_early']:.0f}/{r['likely_used']:.0f}/{r['likely_decoded']:.0f}"
            print(
                f"{config:<26}{r['mode']:<10}{r['streams']:>7}{r['final_p50_s']:>9.2f}s"
                f"{r['final_p95_s']:>6.2f}s{r['final_max_s']:>6.2f}s{r['missed']:>7}"
                f"{r['first_partial_p50_s']:>8.2f}s{r['max_lag_ms'] / 1000:>5.1f}s"
                f"{r['cpu_percent']:>5.0f}%{cores:>10}{100 * r['engine_busy']:>6.0f}%"
                f"{r['final_wait_p50_ms'] / 1000:>8.2f}s{r['final_wait_p95_ms'] / 1000:>6.2f}s"
                f"{partials:>16}{likely:>13}{statistics.fmean(r['wer']):>7.3f}{max(r['wer']):>6.3f}"
                f"{r['kbit_s']:>7.0f}{r['split']:>6}{r['continued']:>5}"
            )
    print(f"offline WER (faster-whisper) on the same utterances: {offline:.3f}")
    for config, rows in results.items():
        held: dict[str, int] = {}
        for r in rows:
            fast = r["final_p95_s"] <= HELD_P95_S and not r["missed"]
            held[r["mode"]] = max(held.get(r["mode"], 0), r["streams"] if fast else 0)
        print(f"{config}: most streams held at final p95 <= {HELD_P95_S} s: {held}")
    configs = list(results)
    for other in configs[1:]:
        print(f"{configs[0]} against {other} (final p50, p95 ratios; below 1: {configs[0]} faster)")
        base = {(r["mode"], r["streams"]): r for r in results[other]}
        for r in results[configs[0]]:
            b = base.get((r["mode"], r["streams"]))
            if b is not None:
                p50, p95 = r["final_p50_s"] / b["final_p50_s"], r["final_p95_s"] / b["final_p95_s"]
                print(f"  {r['mode']:<10}{r['streams']:>3} streams: {p50:.2f}, {p95:.2f}")
    print(
        "targets (4 streams): together p50 <= 1.2 s, p95 <= 2.0 s; random p50 <= 1.0 s, "
        "p95 <= 1.6 s; 1 stream p50 <= 0.9 s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES), help="start modes: " + ", ".join(MODES))
    parser.add_argument("--streams", default="1,2,4,8,16", help="concurrency levels")
    parser.add_argument(
        "--engines",
        default="faster-whisper~fast,faster-whisper",
        help="engine[:batch_finals][@stream_engines][/opus<bitrate>][~policy][+setting=value] "
        "per run, the first compared with the others, e.g. faster-whisper,whispercpp,"
        "faster-whisper@1,faster-whisper/opus16000,faster-whisper~fast",
    )
    parser.add_argument("--seed", type=int, default=7, help="for the random start offsets")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown start mode {sorted(unknown)}; use {', '.join(MODES)}")
    counts = [int(c) for c in args.streams.split(",")]
    registry.resolve("tiny.en")  # build the ggml file first if needed
    audio, refs = utterances()
    run = Run(joined(audio), refs, align(audio), args.seed)
    offline = offline_wer(audio, refs)
    results = {c: asyncio.run(bench(counts, modes, c, run)) for c in args.engines.split(",")}
    report(results, offline, run.sentences)
    if args.json:
        args.json.write_text(json.dumps({"offline_wer": offline, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
