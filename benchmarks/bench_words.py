"""What word times cost: each engine with and without them, in the same run.

Two workloads, each engine, 2 threads: the eval recordings with a reference
transcribed whole (files; ``--limit`` takes the first N), and the live
stream's utterances transcribed one by one as finals are (clips of 2-10 s).
Rounds alternate without and with word times, and the fastest round of each
counts (the machine is noisy); the ratios are the time with word times over the
time without, in the same run: wall time, and CPU time of the process (every
thread), which other jobs on a shared machine disturb less. WER shows whether
the text changes.

    .venv/bin/python benchmarks/bench_words.py [--rounds 3] [--limit 12] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.corpus import UTTERANCES, corpus_wer, eval_items, eval_with_text  # noqa: E402
from voxwire.audio.decoding import decode  # noqa: E402
from voxwire.audio.samples import Audio  # noqa: E402
from voxwire.workers.engine import Engine, EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402

ENGINES = ("whispercpp", "faster-whisper")


def _run(
    engine: Engine, clips: list[Audio], options: EngineOptions
) -> tuple[float, float, list[str]]:
    """Wall seconds, CPU seconds of this process (every thread) and the texts."""
    started, cpu = time.perf_counter(), time.process_time()
    texts = [" ".join(s.text for s in engine.transcribe(clip, options)) for clip in clips]
    return time.perf_counter() - started, time.process_time() - cpu, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=12, help="eval files (0: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    files = eval_with_text()[: args.limit or None]
    file_audio = [decode(i.path.read_bytes(), max_seconds=120).samples for i in files]
    refs = [i.text or "" for i in files]
    by_id = {i.id: i for i in eval_items()}
    finals = [decode(by_id[u].path.read_bytes()).samples for u in UTTERANCES]
    workloads = {
        f"files ({len(files)}, {sum(a.size for a in file_audio) / 16_000:.0f} s)": file_audio,
        f"finals ({len(finals)}, {sum(a.size for a in finals) / 16_000:.0f} s)": finals,
    }
    rows = []
    for name in ENGINES:
        engine = create_engine(name, "tiny.en")
        base = EngineOptions(language="en", threads=2, word_timestamps=False)
        try:
            for workload, clips in workloads.items():
                audio_s = sum(c.size for c in clips) / 16_000
                best = {False: float("inf"), True: float("inf")}
                cpu = {False: float("inf"), True: float("inf")}
                texts: dict[bool, list[str]] = {}
                _run(engine, clips[:1], base)  # warm up
                for _ in range(args.rounds):
                    for words in (False, True):
                        spent, used, texts[words] = _run(
                            engine, clips, replace(base, word_timestamps=words)
                        )
                        best[words] = min(best[words], spent)
                        cpu[words] = min(cpu[words], used)
                row = {
                    "engine": name,
                    "workload": workload,
                    "audio_s": round(audio_s, 1),
                    "rtfx_without": round(audio_s / best[False], 2),
                    "rtfx_with": round(audio_s / best[True], 2),
                    "ratio": round(best[True] / best[False], 3),
                    "ms_per_clip_without": round(1000 * best[False] / len(clips)),
                    "ms_per_clip_with": round(1000 * best[True] / len(clips)),
                    "cpu_s_per_audio_s_without": round(cpu[False] / audio_s, 3),
                    "cpu_s_per_audio_s_with": round(cpu[True] / audio_s, 3),
                    "cpu_ratio": round(cpu[True] / cpu[False], 3),
                }
                if workload.startswith("files"):
                    row["wer_without"] = round(corpus_wer(refs, texts[False]), 4)
                    row["wer_with"] = round(corpus_wer(refs, texts[True]), 4)
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            engine.close()
    print()
    print(
        "| engine | workload | audio s/s without / with | wall ratio "
        "| CPU s per audio s without / with | CPU ratio |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['engine']} | {r['workload']} | {r['rtfx_without']} / {r['rtfx_with']} "
            f"| {r['ratio']} | {r['cpu_s_per_audio_s_without']} / {r['cpu_s_per_audio_s_with']} "
            f"| {r['cpu_ratio']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
