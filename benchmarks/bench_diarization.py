"""Diarization error rate and cost, for files and for live streams.

The references: the recordings of ``../shared/eval`` whose manifest row names
an RTTM file (three: Picovoice's falcon test, three speakers in turn; pyannote's
sample, two speakers with a little overlap; an AMI meeting excerpt, four
speakers who often talk at once). DER is pyannote.metrics'
``DiarizationErrorRate`` with the standard collar of 250 ms (0.25 s around each
reference boundary is not scored) and overlapping speech scored (a one-label
system cannot get it right), summed over the recordings; its parts are printed
too (missed speech, false alarm, confusion), and DER with overlapped speech
left out of the scoring (``skip_overlap``). Two bounds come first, scored the same
way from the references themselves: the reference with no more than two voices at
once (what the segmentation network can hear) and with one at a time (a live
final's pieces carry one speaker each).

- files: :func:`voxwire.workers.speakers.segmented.diarize` on each whole recording;
- live: the recording's frames through Silero VAD and the stream endpointer in
  order, as a stream receives them (the same decisions as at real time, without
  waiting for it); each final's audio is embedded and given a label by the online
  tracker (:class:`voxwire.workers.speakers.tracker.SpeakerTracker`) the moment
  it closes, and split where the voice changes inside it, by the stream worker's
  code (:class:`voxwire.workers.speakers.live.StreamSpeakers`); labels are never
  revised. The hypothesis is the finals (their 200 ms pre- and post-roll included)
  with their labels.

Cost: wall seconds per audio second on this machine (segmentation, embeddings,
clustering; live: the VAD and endpointer too; no transcription), against the
Silero VAD pass alone measured in the same run. ``--thresholds`` prints DER for
other clustering thresholds (the choice of the default). Needs the dev
dependency pyannote.metrics.

    .venv/bin/python benchmarks/bench_diarization.py [--thresholds 0.5,0.55,0.65,0.7]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from pyannote.core import Annotation, Segment
from pyannote.metrics.diarization import DiarizationErrorRate

from voxwire.audio.decoding import SAMPLE_RATE, Audio, decode
from voxwire.workers.speakers.encoder import SpeakerEncoder
from voxwire.workers.speakers.files import Turn
from voxwire.workers.speakers.live import StreamSpeakers
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize
from voxwire.workers.stream.endpointing import SegmentFinal, endpoint
from voxwire.workers.vad import SileroVad, speech_probabilities

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
COLLAR_S = 0.25


@dataclass(frozen=True, slots=True)
class Recording:
    name: str
    audio: Audio
    reference: Annotation

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


def load_rttm(path: Path) -> Annotation:
    annotation = Annotation()
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "SPEAKER":
            start, duration = float(fields[3]), float(fields[4])
            annotation[Segment(start, start + duration)] = fields[7]
    return annotation


def recordings() -> list[Recording]:
    found = []
    for line in (EVAL / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("rttm"):
            audio = decode((EVAL / row["audio"]).read_bytes()).samples
            found.append(Recording(row["id"], audio, load_rttm(EVAL / row["rttm"])))
    return found


def stream_turns(audio: Audio) -> list[Turn]:
    """The finals of ``audio`` as a live stream, each labelled (and split where the
    voice changes) by the stream worker's code as it closes."""
    speakers = StreamSpeakers(True, None)
    turns = []
    for event in endpoint(speech_probabilities(SileroVad(), audio)):
        if isinstance(event, SegmentFinal):
            piece = audio[event.start_ms * 16 : event.end_ms * 16]
            words = " ".join(["word"] * 100)  # no transcription: only the times count
            for one in speakers.pieces(event.start_ms, event.end_ms, words, piece):
                turns.append(Turn(one.start_ms, one.end_ms, one.speaker or "?"))
    return turns


def at_most(reference: Annotation, voices: int) -> list[Turn]:
    """The reference with no more than ``voices`` at once (the ones whose turn started
    last are left out), on a 10 ms grid: the best a system that hears that many
    voices at most can do."""
    talking = np.zeros(int(reference.get_timeline().extent().end * 100) + 1, np.int64)
    kept: list[Turn] = []
    for segment, _, label in sorted(reference.itertracks(yield_label=True), key=lambda t: t[0]):
        frames = np.arange(int(segment.start * 100), int(segment.end * 100))
        heard = frames[talking[frames] < voices]
        talking[heard] += 1
        cuts = np.flatnonzero(np.diff(heard) > 1) + 1
        for run in np.split(heard, cuts):
            if len(run):
                kept.append(Turn(int(run[0]) * 10, (int(run[-1]) + 1) * 10, str(label)))
    return kept


def annotation(turns: list[Turn]) -> Annotation:
    result = Annotation()
    for turn in turns:
        if turn.end_ms > turn.start_ms:
            result[Segment(turn.start_ms / 1000, turn.end_ms / 1000)] = turn.speaker
    return result


def score(
    rows: list[tuple[Recording, list[Turn]]], *, skip_overlap: bool = False
) -> tuple[float, dict[str, float]]:
    metric = DiarizationErrorRate(collar=COLLAR_S, skip_overlap=skip_overlap)
    for recording, turns in rows:
        metric(
            recording.reference, annotation(turns), uem=recording.reference.get_timeline().extent()
        )
    parts = {k: metric[k] for k in ("total", "missed detection", "false alarm", "confusion")}
    return abs(metric), parts


def report(label: str, rows: list[tuple[Recording, list[Turn]]], seconds: float) -> None:
    der, parts = score(rows)
    alone, _ = score(rows, skip_overlap=True)
    total = parts["total"] or 1.0
    audio = sum(r.seconds for r, _ in rows)
    print(
        f"\n{label}: DER {der:.1%} (missed {parts['missed detection'] / total:.1%}, "
        f"false alarm {parts['false alarm'] / total:.1%}, "
        f"confusion {parts['confusion'] / total:.1%}); overlapped speech not scored: "
        f"{alone:.1%}; {seconds / audio:.3f} s per audio s"
    )
    print(f"  {'recording':<26} {'speakers':>8} {'found':>5} {'DER':>7} {'no overlap':>10}")
    for recording, turns in rows:
        one, _ = score([(recording, turns)])
        lone, _ = score([(recording, turns)], skip_overlap=True)
        print(
            f"  {recording.name:<26} {len(recording.reference.labels()):>8} "
            f"{len({t.speaker for t in turns}):>5} {one:>7.1%} {lone:>10.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thresholds", default="", help="comma-separated clustering thresholds")
    args = parser.parse_args()
    encoder = SpeakerEncoder.load()
    recs = recordings()
    audio_s = sum(r.seconds for r in recs)
    print(f"{len(recs)} recordings with RTTM, {audio_s:.1f} s of audio; collar {COLLAR_S} s")

    started = time.perf_counter()
    for r in recs:
        speech_probabilities(SileroVad(), r.audio)
    vad_s = time.perf_counter() - started
    print(f"baseline, Silero VAD alone: {vad_s / audio_s:.3f} s per audio s")

    for voices in (2, 1):
        der, _ = score([(r, at_most(r.reference, voices)) for r in recs])
        print(f"the reference with at most {voices} voice(s) at once: DER {der:.1%}")

    options = DiarizationOptions()
    started = time.perf_counter()
    files = [(r, diarize(r.audio, encoder, options)) for r in recs]
    report("files", files, time.perf_counter() - started)

    started = time.perf_counter()
    live = [(r, stream_turns(r.audio)) for r in recs]
    report("live", live, time.perf_counter() - started)

    for threshold in (float(t) for t in args.thresholds.split(",") if t):
        turned = [
            (r, diarize(r.audio, encoder, replace(options, threshold=threshold))) for r in recs
        ]
        der, _ = score(turned)
        counts = [len({t.speaker for t in turns}) for _, turns in turned]
        print(f"threshold {threshold:.2f}: files DER {der:.1%}, speakers found {counts}")


if __name__ == "__main__":
    main()
