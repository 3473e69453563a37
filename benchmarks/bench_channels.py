"""What separate channels cost: CPU seconds per audio second of a two-party
call transcribed as two tracks (``channels: separate``) against the same call
mixed to mono, by the file job itself (faster-whisper tiny.en by default), with
the WER of each.

The call is :func:`evaluation.stereo_calls.two_party_call` (eval recordings, one
party per channel, alternating turns that overlap a little) at 8 kHz mu-law, as
an upload decodes it. CPU time is the process's (all threads), best of
``--repeat`` runs.

    .venv/bin/python benchmarks/bench_channels.py [--repeat 2] [--engine faster-whisper]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from evaluation.corpus import corpus_wer
from evaluation.stereo_calls import mulaw_stereo_wav, two_party_call
from voxwire.audio.decoding import decode
from voxwire.wire.records import FileJob
from voxwire.workers.engine import EngineOptions
from voxwire.workers.engines import create_engine
from voxwire.workers.files.job import run_file_job
from voxwire.workers.files.tracks import run_tracks_job
from voxwire_client.messages import Message, TranscriptMessage


def cpu_seconds(
    run: Callable[[], TranscriptMessage], repeat: int
) -> tuple[float, TranscriptMessage]:
    best, out = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        out = run()
        best = min(best, time.process_time() - started)
    assert out is not None
    return best, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--engine", default="faster-whisper")
    parser.add_argument("--model", default="tiny.en")
    args = parser.parse_args()
    call = two_party_call()
    decoded = decode(mulaw_stereo_wav(call), separate=True)
    seconds = decoded.duration_s
    engine = create_engine(args.engine, args.model)
    options = EngineOptions(language="en")
    separate = FileJob(
        sid="bench", tenant_id="t", audio_key="-", duration_ms=round(seconds * 1000),
        model=args.model, channels="separate", channel_labels=("agent", "customer"),
    )  # fmt: skip
    mixed = separate.model_copy(update={"channels": "mixed", "channel_labels": None})

    def transcript(runner: Callable[[Callable[[Message], None]], None]) -> TranscriptMessage:
        seen: list[Message] = []
        runner(seen.append)
        return next(m for m in seen if isinstance(m, TranscriptMessage))

    def two() -> TranscriptMessage:
        return transcript(
            lambda emit: run_tracks_job(separate, decoded.tracks, engine, options, emit)
        )

    def one() -> TranscriptMessage:
        return transcript(lambda emit: run_file_job(mixed, decoded.samples, engine, options, emit))

    one()  # warm up: model load, VAD session
    agent, customer = call.refs
    refs = [" ".join((agent[0], customer[0], agent[1], customer[1]))]  # in turn order
    rows = []
    for name, run in (("mono (mixed)", one), ("two channels (separate)", two)):
        cpu, result = cpu_seconds(run, args.repeat)
        wer = corpus_wer(refs, [result.text])
        rows.append((name, cpu / seconds, wer, len(result.segments)))
    print(f"{seconds:.1f} s call, 8 kHz mu-law stereo, {args.engine} {args.model}")
    print(f"{'':26} {'CPU s / audio s':>16} {'WER (turn order)':>16} {'finals':>7}")
    for name, per_s, wer, finals in rows:
        print(f"{name:26} {per_s:16.3f} {wer:16.3f} {finals:7d}")
    print(f"two channels / mono: {rows[1][1] / rows[0][1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
