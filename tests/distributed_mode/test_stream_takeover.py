"""A live stream whose worker is killed (SIGKILL) or stopped (SIGTERM, as
Kubernetes does) mid-stream: the other worker takes the session over from the
Kafka audio log and its checkpoint, and the client sees every final once, with
seq unbroken. A stopped worker leaves its group at once and exits 0."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable

import pytest

from evaluation.corpus import UTTERANCES, corpus_wer, joined_utterances
from evaluation.distributed import DistributedPlatform
from voxwire_client import Client, Transcript, pcm_chunks
from voxwire_client.messages import Message, SegmentMessage

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_killed_or_stopped_stream_worker_is_replaced_without_losing_or_repeating_finals(
    cluster: DistributedPlatform, stop: str
) -> None:
    pcm, _, refs = joined_utterances()
    for worker in ("worker-0", "worker-1"):  # both in the group: no rebalance mid-stream
        _wait_until(lambda w=worker: _owns_audio(cluster, w))
    events: list[Message] = []
    outcome: list[Transcript | BaseException] = []

    def stream() -> None:
        try:
            with Client(cluster.url, cluster.api_key, cluster.mqtt_url) as client:
                outcome.append(client.stream(pcm_chunks(pcm), speed=1.5, on_event=events.append))
        except BaseException as exc:  # reported by the test below
            outcome.append(exc)

    streaming = threading.Thread(target=stream, daemon=True)
    streaming.start()
    deadline = time.monotonic() + 120
    while not any(m.type == "final" for m in events):  # the stream is under way
        assert time.monotonic() < deadline and streaming.is_alive(), ("no final came", outcome)
        time.sleep(0.1)
    sid = events[0].sid
    (owner,) = [w for w in ("worker-0", "worker-1") if f"stream {sid} opened" in cluster.log(w)]
    assert f"stream {sid} moved" not in cluster.log(owner)
    if stop == "SIGKILL":
        cluster.kill(owner)
    else:
        process = cluster.processes[owner]
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(60) == 0, cluster.log(owner)
        assert "Traceback" not in cluster.log(owner, tail=None), cluster.log(owner)
    other = "worker-1" if owner == "worker-0" else "worker-0"
    streaming.join(300)
    assert outcome and isinstance(outcome[0], Transcript), ("the stream did not complete", outcome)
    assert f"stream {sid} resumed at chunk" in cluster.log(other, tail=None)

    assert [m.seq for m in events] == list(range(events[0].seq, events[0].seq + len(events)))
    finals = [m for m in events if isinstance(m, SegmentMessage) and m.type == "final"]
    assert [f.segment.index for f in finals] == list(range(len(UTTERANCES))), [
        f.segment.text for f in finals
    ]
    wer = corpus_wer(refs, [f.segment.text for f in finals])
    print(f"stream WER across the takeover: {wer:.4f}")
    assert wer <= 0.1
    transcript = outcome[0]
    assert isinstance(transcript, Transcript)
    assert [s.text for s in transcript.segments] == [f.segment.text for f in finals]


def _owns_audio(cluster: DistributedPlatform, worker: str) -> bool:
    """The worker's stream consumer holds some partitions of the audio topic."""
    assigned = re.findall(
        r"transcription\.audio .*assigned partitions \[(.*)\]", cluster.log(worker)
    )
    return any(assigned)  # cooperative rebalancing also logs empty increments


def _wait_until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)
