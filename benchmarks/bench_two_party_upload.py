"""Two-party mono calls through the upload path (``bench_two_party.py --path upload``).

Each call of :mod:`bench_two_party` is written as a 16 kHz PCM16 WAV and as an
8 kHz G.711 mu-law WAV, uploaded to one embedded platform (the default engine)
with ``diarize`` on and no bounds, as a new user sends it, and followed to its
transcript. Per call and rate it prints:

- ``component``: :func:`~voxwire.workers.speakers.segmented.diarize` on the
  samples the upload decodes (the same decoder), its DER and speakers found;
- ``upload``: the speakers on the finals, the word and final attribution errors
  (:mod:`evaluation.speaker_attribution`), and the DER of the finals' spans
  labelled by their speakers (Whisper's segment times: coarser than turns).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bench_diarization import annotation
from bench_telephone import mulaw_wav, pcm_wav
from bench_two_party import COLLAR_S, Call
from pyannote.core import Annotation
from pyannote.metrics.diarization import DiarizationErrorRate

from evaluation.speaker_attribution import RefTurn, attribution
from voxwire.audio.decoding import SAMPLE_RATE, decode
from voxwire.audio.resample import resample
from voxwire.core.config import Settings
from voxwire.platform import build
from voxwire.workers.speakers.encoder import shared_encoder
from voxwire.workers.speakers.files import Turn
from voxwire.workers.speakers.segmented import DiarizationOptions, diarize
from voxwire_client import AsyncClient
from voxwire_client.messages import SegmentData


@dataclass(frozen=True)
class Row:
    call: str
    rate: str
    component_der: float
    component_speakers: int
    speakers: int
    word_error: float
    final_error: float
    finals: int
    finals_der: float


def reference_turns(reference: Annotation) -> list[RefTurn]:
    return [
        RefTurn(round(seg.start * 1000), round(seg.end * 1000), str(label))
        for seg, _, label in reference.itertracks(yield_label=True)
    ]


def files_of(call: Call) -> dict[str, bytes]:
    """The call as the two files a user uploads."""
    at8k = resample(call.audio, SAMPLE_RATE, 8_000)
    return {"16k": pcm_wav(call.audio, SAMPLE_RATE), "8k-ul": mulaw_wav(at8k, 8_000)}


def _der(reference: Annotation, turns: list[Turn]) -> float:
    metric = DiarizationErrorRate(collar=COLLAR_S)
    return float(metric(reference, annotation(turns), uem=reference.get_timeline().extent()))


def finals_turns(finals: list[SegmentData]) -> list[Turn]:
    return [Turn(s.start_ms, s.end_ms, s.speaker or "?") for s in finals if s.end_ms > s.start_ms]


async def _upload(client: AsyncClient, path: Path) -> list[SegmentData]:
    created = await client.upload(path, diarize=True)
    transcript = await client.follow(created.sid)
    return list(transcript.segments)


async def measure(calls: list[Call]) -> list[Row]:
    rows: list[Row] = []
    encoder = shared_encoder()
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
            for call in calls:
                for rate, data in files_of(call).items():
                    path = Path(tmp) / f"{call.name}-{rate}.wav"
                    path.write_bytes(data)
                    samples = decode(data, name=path.name).samples
                    turns = await asyncio.to_thread(diarize, samples, encoder, DiarizationOptions())
                    finals = await _upload(client, path)
                    scored = attribution(finals, reference_turns(call.reference))
                    row = Row(
                        call.name, rate, _der(call.reference, turns),
                        len({t.speaker for t in turns}), scored.speakers, scored.error,
                        scored.final_error, scored.finals,
                        _der(call.reference, finals_turns(finals)),
                    )  # fmt: skip
                    print_row(row)
                    rows.append(row)
        finally:
            await client.aclose()
            await platform.stop()
    return rows


HEADER = (
    f"{'call':<24} {'rate':<6} {'component DER':>14} {'spk':>4} | {'upload spk':>10} "
    f"{'word attr err':>13} {'final attr err':>16} {'finals DER':>10}"
)


def print_row(row: Row) -> None:
    print(
        f"{row.call:<24} {row.rate:<6} {row.component_der:>14.1%} {row.component_speakers:>4} | "
        f"{row.speakers:>10} {row.word_error:>13.1%} "
        f"{row.final_error:>9.1%} of {row.finals:>3} {row.finals_der:>10.1%}",
        flush=True,
    )


def run_uploads(calls: list[Call]) -> None:
    print(HEADER, flush=True)
    rows = asyncio.run(measure(calls))
    print(
        f"mean: component DER {np.mean([r.component_der for r in rows]):.1%}, "
        f"upload word attribution error {np.mean([r.word_error for r in rows]):.1%}, "
        f"finals DER {np.mean([r.finals_der for r in rows]):.1%}; two speakers found: "
        f"component {sum(r.component_speakers == 2 for r in rows)}/{len(rows)}, "
        f"upload {sum(r.speakers == 2 for r in rows)}/{len(rows)}"
    )
