"""What telephone audio costs: WER of the same speech at 16 kHz PCM, 8 kHz PCM
and 8 kHz G.711 mu-law, as files and as live streams, side by side, with the
levers that might lower the telephone band's cost.

Files: every eval recording with a reference (``../shared/eval``) is written as
the file a user would upload (a 16 kHz PCM WAV, an 8 kHz PCM WAV, an 8 kHz
mu-law WAV), decoded by the upload path's :func:`voxwire.audio.decoding.decode`
and transcribed by the files' engine (faster-whisper tiny.en by default).
Live: the eval utterances a live stream plays (:data:`evaluation.corpus.UTTERANCES`,
1 s of silence after each) streamed to an embedded platform in 20 ms chunks in
each encoding and rate; final latency is the platform's own (``vad_ms +
queue_ms + transcribe_ms`` of each final), p50.

Levers, each on the 8 kHz mu-law audio (``--levers``):

- ``linear``: upsample to 16 kHz by linear interpolation instead of the
  band-limited resampler (what a naive decoder does);
- ``beam5``: decode with a beam of 5 instead of greedy (and 16 kHz PCM too,
  for the baseline it must be compared with);
- ``vad0.35``: live only, a lower VAD threshold (telephone speech scores lower),
  for each of the three (16 kHz PCM too, the baseline it must be compared with).

``--all`` streams every eval recording with a reference (212 s, 1 s of silence
after each) instead of the six utterances, for a live WER on as many words as
the files'.

    .venv/bin/python benchmarks/bench_telephone.py [--speed 1] [--all] [--no-live]
        [--no-files] [--levers linear,beam5,vad0.35] [--model tiny.en] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import tempfile
import wave
from dataclasses import dataclass, replace
from pathlib import Path

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.corpus import corpus_wer, eval_with_text, joined_utterances, pcm16
from voxwire.audio.codecs import sample_chunks
from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode, pcm16le_to_float32
from voxwire.audio.g711 import Law, float32_to_g711, g711_to_float32
from voxwire.audio.resample import resample
from voxwire.core.config import Settings
from voxwire.models import registry
from voxwire.platform import build
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire_client import AsyncClient, AudioEncoding, StreamRequest
from voxwire_client.messages import Message, SegmentMessage
from voxwire_client.options import Endpointing


def pcm_wav(samples: Audio, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def mulaw_wav(samples: Audio, rate: int) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as container:
        stream = container.add_stream("pcm_mulaw", rate=rate, layout="mono")
        pcm = np.clip(samples * 32768, -32768, 32767).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()


def linear_upsampled(samples: Audio) -> Audio:
    """8 kHz mu-law decoded and brought to 16 kHz by linear interpolation."""
    at8k = resample(samples, SAMPLE_RATE, 8_000)
    narrow = g711_to_float32(float32_to_g711(at8k, Law.MULAW), Law.MULAW)
    grid = np.arange(narrow.size * 2) / 2
    return np.interp(grid, np.arange(narrow.size), narrow).astype(np.float32)


def file_inputs(wideband: Audio, levers: list[str]) -> dict[str, Audio]:
    """Each condition's 16 kHz samples, as the upload path decodes its file."""
    at8k = resample(wideband, SAMPLE_RATE, 8_000)
    out = {
        "16 kHz PCM": decode(pcm_wav(wideband, SAMPLE_RATE), name="a.wav").samples,
        "8 kHz PCM": decode(pcm_wav(at8k, 8_000), name="a.wav").samples,
        "8 kHz mu-law": decode(mulaw_wav(at8k, 8_000), name="a.wav").samples,
    }
    if "linear" in levers:
        out["8 kHz mu-law, linear"] = linear_upsampled(wideband)
    return out


def files(levers: list[str], model: str) -> dict[str, float]:
    registry.resolve(model)  # whisper.cpp's file is built on first use
    engine = create_engine(Settings().engine.name, model)
    base = EngineOptions()
    items = eval_with_text()
    refs = [str(item.text) for item in items]
    texts: dict[str, list[str]] = {}
    beams = {"": base} | ({", beam 5": replace(base, beam_size=5)} if "beam5" in levers else {})
    for n, item in enumerate(items):
        wideband = decode(item.path.read_bytes()).samples
        for name, samples in file_inputs(wideband, levers).items():
            for suffix, options in beams.items():
                if suffix and name not in ("16 kHz PCM", "8 kHz mu-law"):
                    continue
                text = " ".join(s.text for s in engine.transcribe(samples, options))
                texts.setdefault(name + suffix, []).append(text)
        print(f"  files: {n + 1}/{len(items)}", file=sys.stderr)
    engine.close()
    return {name: corpus_wer(refs, hyps) for name, hyps in texts.items()}


@dataclass(frozen=True)
class LiveCase:
    name: str
    encoding: AudioEncoding
    rate: int
    vad_threshold: float = 0.5


def live_cases(levers: list[str]) -> list[LiveCase]:
    cases = [
        LiveCase("16 kHz PCM", AudioEncoding.PCM16, 16_000),
        LiveCase("8 kHz PCM", AudioEncoding.PCM16, 8_000),
        LiveCase("8 kHz mu-law", AudioEncoding.MULAW, 8_000),
    ]
    if "vad0.35" in levers:
        cases += [replace(c, name=f"{c.name}, vad 0.35", vad_threshold=0.35) for c in cases]
    return cases


def every_recording() -> tuple[bytes, list[str]]:
    """Every eval recording with a reference as one PCM16LE stream, 1 s of silence
    after each; their references."""
    items = eval_with_text()
    parts: list[Audio] = []
    for item in items:
        parts += [decode(item.path.read_bytes()).samples, np.zeros(SAMPLE_RATE, np.float32)]
    return pcm16(np.concatenate(parts)), [str(item.text) for item in items]


async def live(
    cases: list[LiveCase], speed: float, corpus: tuple[bytes, list[str]]
) -> dict[str, tuple[float, float]]:
    """Each case streamed on one embedded platform, one after the other:
    (WER, final latency p50 in ms)."""
    pcm, refs = corpus
    speech = pcm16le_to_float32(pcm)
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(http_port=0, mqtt_port=0, ws_port=0, data_dir=Path(tmp))
        platform = build(settings)
        key = (await platform.ensure_key()).key
        assert key is not None
        await platform.start()
        s = platform.settings.listen
        client = AsyncClient(
            f"http://127.0.0.1:{s.http_port}", key.plaintext, f"mqtt://127.0.0.1:{s.mqtt_port}"
        )
        try:
            for case in cases:
                chunks = sample_chunks(speech, case.encoding, case.rate, chunk_ms=20)
                request = StreamRequest(
                    encoding=case.encoding,
                    sample_rate=case.rate,
                    endpointing=Endpointing(vad_threshold=case.vad_threshold),
                )
                latencies: list[int] = []

                def on_event(message: Message, into: list[int] = latencies) -> None:
                    if not isinstance(message, SegmentMessage) or message.type != "final":
                        return
                    if (lat := message.latency) is not None:
                        into.append(lat.vad_ms + lat.queue_ms + lat.transcribe_ms)

                result = await client.stream(
                    chunks, request, chunk_ms=20, speed=speed, on_event=on_event
                )
                heard = " ".join(seg.text for seg in result.segments)
                wer = corpus_wer([" ".join(refs)], [heard])
                out[case.name] = (wer, statistics.median(latencies or [0]))
                print(f"  live: {case.name} done", file=sys.stderr)
        finally:
            await client.aclose()
            await platform.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--speed", type=float, default=1.0, help="live: times real time")
    parser.add_argument("--no-live", action="store_true")
    parser.add_argument("--no-files", action="store_true")
    parser.add_argument("--all", action="store_true", help="live: every recording")
    parser.add_argument("--levers", default="linear,beam5,vad0.35")
    parser.add_argument("--model", default="tiny.en", help="the files' engine's model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    levers = [lever for lever in args.levers.split(",") if lever]
    file_wer = {} if args.no_files else files(levers, args.model)
    live_wer: dict[str, tuple[float, float]] = {}
    if not args.no_live:
        pcm, _, refs = joined_utterances()
        corpus = every_recording() if args.all else (pcm, refs)
        live_wer = asyncio.run(live(live_cases(levers), args.speed, corpus))
    names = list(dict.fromkeys([*file_wer, *live_wer]))
    print(f"{'audio':28} {'files WER':>10} {'live WER':>9} {'final p50':>10}")
    for name in names:
        f = f"{file_wer[name]:.3f}" if name in file_wer else "-"
        w, p = ("-", "-")
        if name in live_wer:
            w, p = f"{live_wer[name][0]:.3f}", f"{live_wer[name][1]:.0f} ms"
        print(f"{name:28} {f:>10} {w:>9} {p:>10}")
    if args.json:
        args.json.write_text(json.dumps({"files": file_wer, "live": live_wer}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
