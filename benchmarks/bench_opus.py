"""Opus live streams against PCM: WER, bytes on the link, decoding cost, and the
final latency of concurrent live streams.

WER. Recordings of ../shared/eval with a reference are each played as their
own live stream through the worker's stream session (Silero VAD, endpointing,
the real engine), chunk by chunk as a device sends them but without waiting
for real time: first as PCM16 (the baseline), then as Opus at each bitrate,
decoded by each of ``--decoders``: ``ffmpeg`` (FFmpeg's decoder, PyAV's) and
``lace`` (libopus 1.5.2 with LACE, ``voxwire models install opus-lace``).
Printed per codec: the corpus WER, the difference to PCM in points, the
kbit/s sent and the time to decode the chunks per audio second. With
``--offline`` each recording is also transcribed whole by the engine, as PCM
and after an Opus round trip through the worker's decoder: the codec's own
damage, without the live segmentation (VAD and endpointing decide on the
decoded audio, so a live stream's segments, and with them its words, may
differ from PCM's for reasons other than the codec).

Latency. Then, per codec, ``--streams`` live streams (4) start together on the
embedded platform (its worker decodes Opus with LACE when that is installed,
so only those rows get a latency) and play in real time over MQTT, with the
machinery and the clock of ``bench_streams.py``: six eval utterances with 1 s
pauses each, the final latency from the end of each sentence's speech in the
audio (forced alignment) to the final's arrival at the stream's subscriber, p50
and p95, and sentences with no final (missed).

Offsets. ``--offsets 0,8,16,24`` plays every codec's recordings after each of
those ms of silence, so that each sound falls elsewhere in the VAD's 32 ms
frames, and prints each codec's WER as the mean over the offsets (and the
range): a comparison of codecs that a few ms of shift cannot tip either way.
Word errors per recording (``--per-recording``) are summed over the offsets.

Noise floor. With ``--noise`` the same PCM16 audio is also played nudged by
what no listener would notice (``--shifts``: 8 and 16 ms of silence before it,
which moves every sound against the VAD's 32 ms frames; ``--gains``: +-0.5 dB):
how far the live WER moves when nothing but the segmentation changes, the
yardstick for the Opus rows. ``--per-recording`` lists, for each recording
whose word errors differ from PCM's in some row, its errors and final count
per row.

The default plays the first ``--limit`` (12) recordings for WER, a few minutes on two
cores; ``--full`` plays all of them (24, 212 s of speech).

    .venv/bin/python benchmarks/bench_opus.py [--full | --limit N]
        [--bitrates 12000,16000,24000] [--decoders ffmpeg,lace] [--frame-ms 20]
        [--application audio] [--streams 4] [--offline] [--noise [--shifts 8,16] [--gains -0.5,0.5]]
        [--per-recording] [--offsets 0,8,16,24] [--engine faster-whisper] [--model tiny.en]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jiwer
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_streams import Run, align, bench, joined, utterances  # noqa: E402

from evaluation.corpus import corpus_wer, eval_with_text, normalize  # noqa: E402
from voxwire.audio.codecs import chunk_decoder, opus_packets  # noqa: E402
from voxwire.audio.decoding import Audio, decode, float32_to_pcm16le  # noqa: E402
from voxwire.audio.libopus import OpusLibrary  # noqa: E402
from voxwire.models import opus  # noqa: E402
from voxwire.workers.engine import Engine, EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402
from voxwire.workers.stream.scheduler import Scheduler  # noqa: E402
from voxwire.workers.stream.session import StreamConfig, StreamSession  # noqa: E402
from voxwire.workers.vad import SileroVad  # noqa: E402
from voxwire_client.api import AudioCodec  # noqa: E402
from voxwire_client.client import pcm_chunks  # noqa: E402
from voxwire_client.messages import Message, SegmentMessage  # noqa: E402

OPTIONS = EngineOptions(language="en", threads=2)


@dataclass(frozen=True)
class Codec:
    """One row: what a device sends."""

    label: str
    codec: AudioCodec
    bitrate: int = 0
    """Opus bits per second (0: PCM16)."""
    shift_ms: int = 0
    """Silence played before the audio (a noise-floor row)."""
    gain_db: float = 0.0
    """Gain applied to the audio (a noise-floor row)."""
    lace: OpusLibrary | None = None
    """Decode Opus with this libopus and LACE (None: FFmpeg's decoder)."""

    @property
    def nudged(self) -> bool:
        """A noise-floor row: PCM16 audio nudged, not another codec."""
        return bool(self.shift_ms or self.gain_db)

    def chunks(self, samples: Audio, frame_ms: int, application: str) -> tuple[list[bytes], int]:
        """The chunks of ``samples`` and their duration in ms."""
        if self.codec is AudioCodec.PCM16:
            silence = np.zeros(self.shift_ms * 16, dtype=np.float32)
            nudged = np.concatenate([silence, samples * np.float32(10 ** (self.gain_db / 20))])
            return list(pcm_chunks(float32_to_pcm16le(nudged))), 100
        packets = opus_packets(
            samples, bitrate=self.bitrate, frame_ms=frame_ms, application=application
        )
        return list(packets), frame_ms


def stream_text(
    engine: Engine,
    chunks: list[bytes],
    chunk_ms: int,
    config: StreamConfig,
    opus: OpusLibrary | None = None,
) -> list[str]:
    """The finals of one stream of ``chunks``."""
    out: list[Message] = []
    session = StreamSession(
        "bench", OPTIONS, config, (), vad=SileroVad(), now=time.monotonic, opus=opus
    )
    scheduler = Scheduler(engine)
    for n, chunk in enumerate(chunks):
        try:
            session.push(n, chunk, (n + 1) * chunk_ms / 1000)
        except Exception as exc:  # a bad frame is reported, never fatal
            print(f"  chunk {n}: {exc}")
        out += [m for o in scheduler.run_pending(session) for m in o.messages]
    session.end(len(chunks) * chunk_ms / 1000)
    out += [m for o in scheduler.finish(session) for m in o.messages]
    finals = [m for m in out if isinstance(m, SegmentMessage) and m.type == "final"]
    return [m.segment.text for m in finals]


def decoded(
    chunks: list[bytes], codec: AudioCodec, frame_ms: int, opus: OpusLibrary | None = None
) -> tuple[Audio, float]:
    """What the worker's decoder makes of ``chunks``, and the seconds it took."""
    decoder = chunk_decoder(codec, frame_ms, opus=opus)
    started = time.perf_counter()
    pieces = [decoder.decode(chunk) for chunk in chunks]
    return np.concatenate(pieces), time.perf_counter() - started


def offline_text(engine: Engine, samples: Audio) -> str:
    return " ".join(s.text for s in engine.transcribe(samples, OPTIONS))


def latencies(codecs: list[Codec], streams: int, frame_ms: int) -> dict[str, dict[str, Any]]:
    """Per codec: ``streams`` real-time streams started together (bench_streams)."""
    audio, refs = utterances()
    run = Run(joined(audio), refs, align(audio), seed=7)
    out = {}
    for c in codecs:
        config = "faster-whisper" + (f"/opus{c.bitrate}" if c.bitrate else "")
        rows = asyncio.run(bench([streams], ["together"], config, run, frame_ms=frame_ms))
        out[c.label] = rows[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bitrates", default="12000,16000,24000")
    parser.add_argument("--frame-ms", type=int, default=20)
    parser.add_argument("--application", default="audio", help="libopus mode: audio or voip")
    parser.add_argument(
        "--decoders", default="ffmpeg,lace", help="Opus decoders: ffmpeg, lace (libopus + LACE)"
    )
    parser.add_argument("--engine", default="faster-whisper")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--limit", type=int, default=12, help="recordings played for WER")
    parser.add_argument("--full", action="store_true", help="every recording with a reference")
    parser.add_argument("--offline", action="store_true", help="also WER of whole files")
    parser.add_argument("--streams", type=int, default=4, help="live streams (0: no latency)")
    parser.add_argument("--noise", action="store_true", help="also PCM16 nudged: the noise floor")
    parser.add_argument("--shifts", default="8,16", help="ms of silence before the audio")
    parser.add_argument("--gains", default="-0.5,0.5", help="gains in dB")
    parser.add_argument("--per-recording", action="store_true", help="word errors per recording")
    parser.add_argument(
        "--offsets", default="0", help="ms of silence before every codec's audio, WER averaged"
    )
    args = parser.parse_args()
    items = eval_with_text()[: None if args.full else args.limit]
    audios: list[Audio] = [decode(i.path.read_bytes(), max_seconds=600).samples for i in items]
    refs = [i.text or "" for i in items]
    seconds = sum(len(a) for a in audios) / 16_000
    decoders = {"ffmpeg": None, "lace": None}
    if "lace" in args.decoders.split(","):
        decoders["lace"] = opus.library()
        if decoders["lace"] is None:
            sys.exit(
                f"no libopus with LACE: run .venv/bin/voxwire models install {opus.OPUS_MODEL}"
            )
    codecs = [Codec("pcm16", AudioCodec.PCM16)] + [
        Codec(f"opus {int(b) // 1000}k {name}", AudioCodec.OPUS, int(b), lace=decoders[name])
        for b in args.bitrates.split(",")
        for name in args.decoders.split(",")
    ]
    if args.noise:
        codecs += [Codec(f"pcm16 +{int(ms)}ms", AudioCodec.PCM16, shift_ms=int(ms))
                   for ms in args.shifts.split(",")]  # fmt: skip
        codecs += [Codec(f"pcm16 {float(db):+g}dB", AudioCodec.PCM16, gain_db=float(db))
                   for db in args.gains.split(",")]  # fmt: skip
    engine = create_engine(args.engine, args.model)
    words = sum(len(normalize(r).split()) for r in refs)
    offsets = [int(ms) for ms in args.offsets.split(",")]
    print(f"{len(items)} recordings, {seconds:.0f} s of speech, {words} words (1 word ~ "
          f"{100 / words:.2f} pt), {args.engine} {args.model}, played at offsets "
          f"{', '.join(map(str, offsets))} ms", flush=True)  # fmt: skip
    rows: dict[str, dict[str, Any]] = {}
    for c in codecs:
        plays = []
        for ms in offsets:
            silence = np.zeros(ms * 16, dtype=np.float32)
            moved = [np.concatenate([silence, a]) for a in audios]
            plays.append(play(engine, c, moved, refs, args))
            print(f"  {c.label} +{ms} ms: WER {plays[-1]['wer']:.3f}", file=sys.stderr, flush=True)
        rows[c.label] = averaged(plays)
    engine.close()
    lace_on_platform = opus.library() is not None  # as the embedded platform's worker decides
    played = [
        c
        for c in codecs
        if not c.nudged
        and (c.codec is AudioCodec.PCM16 or (c.lace is not None) == lace_on_platform)
    ]
    live = latencies(played, args.streams, args.frame_ms) if args.streams else {}
    report(rows, live, args.streams)
    if args.per_recording:
        per_recording([i.id for i in items], rows)


def play(
    engine: Engine, c: Codec, audios: list[Audio], refs: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """One codec's row: every recording streamed through a stream session."""
    seconds = sum(len(a) for a in audios) / 16_000
    sent = [c.chunks(a, args.frame_ms, args.application) for a in audios]
    config = StreamConfig(encoding=c.codec, frame_ms=args.frame_ms)
    finals = [stream_text(engine, *s, config, c.lace) for s in sent]
    hyps = [" ".join(f) for f in finals]
    row = {
        "kbit_s": sum(len(x) for chunks, _ in sent for x in chunks) * 8 / seconds / 1000,
        "wer": corpus_wer(refs, hyps),
        "errors": [word_errors(r, h) for r, h in zip(refs, hyps, strict=True)],
        "finals": [len(f) for f in finals],
    }
    decodes = [decoded(chunks, c.codec, args.frame_ms, c.lace) for chunks, _ in sent]
    row["decode_ms_s"] = sum(t for _, t in decodes) / seconds * 1000
    if args.offline:
        row["offline"] = corpus_wer(refs, [offline_text(engine, a) for a, _ in decodes])
    return row


def averaged(plays: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from a codec's plays at several offsets: the mean of each figure,
    the WER of every play (``wers``), word errors and finals summed per recording."""
    row: dict[str, Any] = {
        key: float(np.mean([p[key] for p in plays]))
        for key in ("kbit_s", "wer", "decode_ms_s", "offline")
        if key in plays[0]
    }
    row["wers"] = [p["wer"] for p in plays]
    for key in ("errors", "finals"):
        row[key] = [sum(each) for each in zip(*(p[key] for p in plays), strict=True)]
    return row


def word_errors(ref: str, hyp: str) -> int:
    """Substitutions, deletions and insertions of ``hyp`` against ``ref``."""
    out = jiwer.process_words(normalize(ref), normalize(hyp) or "<empty>")
    return int(out.substitutions + out.deletions + out.insertions)


def per_recording(ids: list[str], rows: dict[str, dict[str, Any]]) -> None:
    """Word errors (and finals) of each recording whose errors differ between rows."""
    labels = list(rows)
    print(f"\n{'word errors (finals)':<36}" + "".join(f"{x:>16}" for x in labels))
    for n, name in enumerate(ids):
        errors = [rows[x]["errors"][n] for x in labels]
        if len(set(errors)) > 1:
            cells = [f"{rows[x]['errors'][n]} ({rows[x]['finals'][n]})" for x in labels]
            print(f"{name:<36}" + "".join(f"{c:>16}" for c in cells))
    totals = [f"{sum(rows[x]['errors'])}" for x in labels]
    print(f"{'all':<36}" + "".join(f"{t:>16}" for t in totals))


def report(rows: dict[str, dict[str, Any]], live: dict[str, dict[str, Any]], streams: int) -> None:
    base = rows["pcm16"]
    head = f"{'codec':<16}{'kbit/s':>8}{'WER':>7}{'vs PCM':>9}{'decode ms/s':>12}"
    spread = len(base["wers"]) > 1
    if spread:
        head += f"{'WER min-max':>14}"
    if "offline" in base:
        head += f"{'file WER':>10}{'vs PCM':>9}"
    if live:
        head += f"  {streams} streams: {'final p50':>9}{'p95':>7}{'missed':>7}"
    print(head)
    for label, r in rows.items():
        line = (
            f"{label:<16}{r['kbit_s']:8.1f}{r['wer']:7.3f}"
            f"{(r['wer'] - base['wer']) * 100:+7.1f}pt{r['decode_ms_s']:12.2f}"
        )
        if spread:
            line += f"{min(r['wers']):8.3f}-{max(r['wers']):.3f}"
        if "offline" in r:
            line += f"{r['offline']:10.3f}{(r['offline'] - base['offline']) * 100:+7.1f}pt"
        if label in live:
            x = live[label]
            line += f"  {'':>{len(str(streams)) + 10}}{x['final_p50_s']:8.2f}s"
            line += f"{x['final_p95_s']:6.2f}s{x['missed']:7}"
        print(line)


if __name__ == "__main__":
    main()
