"""Opus live streams against PCM: WER, bytes on the link, decoding cost.

Every recording of ../shared/eval with a reference is played as its own live
stream through the worker's stream session (Silero VAD, endpointing, the
real engine), chunk by chunk as a device sends it but without waiting for
real time: first as PCM16 (the baseline), then as Opus at each bitrate. It
prints the corpus WER of each, the difference to PCM in points, the kbit/s
sent and the time to decode the chunks per audio second.

    .venv/bin/python benchmarks/bench_opus.py [--bitrates 12000,16000,24000]
        [--frame-ms 20] [--application voip] [--engine faster-whisper] [--model tiny.en]
        [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import corpus_wer, eval_with_text  # noqa: E402
from voxwire.core.audio import Audio, decode, float32_to_pcm16le  # noqa: E402
from voxwire.core.codecs import chunk_decoder, opus_packets  # noqa: E402
from voxwire.workers.engine import Engine, EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402
from voxwire.workers.stream_pipeline import StreamConfig, StreamSession  # noqa: E402
from voxwire.workers.stream_scheduler import Scheduler  # noqa: E402
from voxwire.workers.vad import SileroVad  # noqa: E402
from voxwire_client.api import AudioCodec  # noqa: E402
from voxwire_client.client import pcm_chunks  # noqa: E402
from voxwire_client.messages import Message, SegmentMessage  # noqa: E402


def stream_text(engine: Engine, chunks: list[bytes], chunk_ms: int, config: StreamConfig) -> str:
    """The finals of one stream of ``chunks``, joined."""
    out: list[Message] = []
    options = EngineOptions(language="en", threads=2)
    session = StreamSession(
        "bench", options, config, (), out.append, vad=SileroVad(), now=time.monotonic
    )
    scheduler = Scheduler(engine)
    for n, chunk in enumerate(chunks):
        try:
            session.push(n, chunk, (n + 1) * chunk_ms / 1000)
        except Exception as exc:  # a bad frame is reported, never fatal
            print(f"  chunk {n}: {exc}")
        scheduler.run_pending(session)
    session.end(len(chunks) * chunk_ms / 1000)
    scheduler.finish(session)
    finals = [m for m in out if isinstance(m, SegmentMessage) and m.type == "final"]
    return " ".join(m.segment.text for m in finals)


def decode_seconds(chunks: list[bytes], codec: AudioCodec, frame_ms: int) -> float:
    decoder = chunk_decoder(codec, frame_ms)
    started = time.perf_counter()
    for chunk in chunks:
        decoder.decode(chunk)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bitrates", default="12000,16000,24000")
    parser.add_argument("--frame-ms", type=int, default=20)
    parser.add_argument("--application", default="voip", help="libopus mode: voip or audio")
    parser.add_argument("--engine", default="faster-whisper")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    items = eval_with_text()[: args.limit]
    audios: list[Audio] = [decode(i.path.read_bytes(), max_seconds=600).samples for i in items]
    refs = [i.text or "" for i in items]
    seconds = sum(len(a) for a in audios) / 16_000
    engine = create_engine(args.engine, args.model)
    print(f"{len(items)} recordings, {seconds:.0f} s of speech, {args.engine} {args.model}")
    print(f"{'codec':<18} {'kbit/s':>7} {'WER':>7} {'vs PCM':>8} {'decode ms/s':>12}")

    def row(label: str, codec: AudioCodec, streams: list[list[bytes]], chunk_ms: int) -> float:
        config = StreamConfig(codec=codec, frame_ms=args.frame_ms)
        hyps = [stream_text(engine, chunks, chunk_ms, config) for chunks in streams]
        wer = corpus_wer(refs, hyps)
        sent = sum(len(c) for chunks in streams for c in chunks) * 8 / seconds / 1000
        cost = sum(decode_seconds(c, codec, args.frame_ms) for c in streams) / seconds * 1000
        delta = "" if baseline is None else f"{(wer - baseline) * 100:+.1f} pt"
        print(f"{label:<18} {sent:7.1f} {wer:7.3f} {delta:>8} {cost:12.2f}", flush=True)
        return wer

    baseline: float | None = None
    pcm = [list(pcm_chunks(float32_to_pcm16le(a))) for a in audios]
    baseline = row("pcm16", AudioCodec.PCM16, pcm, 100)
    for bitrate in (int(b) for b in args.bitrates.split(",")):
        opus = [
            list(
                opus_packets(
                    a, bitrate=bitrate, frame_ms=args.frame_ms, application=args.application
                )
            )
            for a in audios
        ]
        row(f"opus {bitrate // 1000}k/{args.frame_ms}ms", AudioCodec.OPUS, opus, args.frame_ms)
    engine.close()


if __name__ == "__main__":
    main()
