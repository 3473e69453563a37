"""Horizontal scale under faults: two gateways, two bridges and two workers on
the real servers. Clients upload files across both gateways and stream live
while one of each role is killed (SIGKILL): a worker in the middle of a job, the
gateway that took half the uploads, a bridge while results flow through it.
Every session completes; its subscriber (the SDK over the surviving gateway)
gets every final once; the stored transcript and history hold each once.

Each bridge has its own persistent MQTT session (``ingest_client_id``), and the
broker keeps queueing a share of client audio for a killed bridge's session:
its supervisor starts it again (with its session) once the other bridge has
taken its results over. Meanwhile the stream's later chunks, and its end, come
through the other bridge ahead of the held ones: they wait for their turn."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from evaluation.corpus import UTTERANCES, eval_with_text, joined_utterances
from evaluation.distributed import DistributedPlatform
from evaluation.ports import free_port
from tests.distributed import Jobs, assert_complete, jobs_done, wait_until
from voxwire_client import AsyncClient, Client, Transcript, pcm_chunks
from voxwire_client.messages import Message, SegmentMessage

pytestmark = pytest.mark.timeout(420)

UPLOADS = 12
FILES = [i.path for i in eval_with_text() if i.duration_s <= 7]
WORKERS = ("worker-0", "worker-1")


def test_two_of_each_role_lose_one_of_each_and_every_session_completes(
    cluster: DistributedPlatform,
) -> None:
    # two bridges on one host: each its own ingest session, else they take turns on one
    cluster.spawn("bridge-1", ingest_client_id=f"voxwire-ingest-{cluster.namespace}-1")
    cluster.spawn("gateway-1", http_port=str(free_port()))
    cluster.wait_ready(gateway="gateway-1")
    survivor = cluster.gateway_url("gateway-1")
    # every member in its groups first: the faults, not the start, move partitions
    for name in ("bridge", "bridge-1"):
        wait_until(lambda n=name: _assigned(cluster, n, "transcription.results") > 0, 60)
    for name in WORKERS:
        wait_until(lambda n=name: _assigned(cluster, n, "transcription.audio") > 0, 60)
        wait_until(lambda n=name: _assigned(cluster, n, "transcription.jobs") > 0, 60)

    stream = _LiveStream(cluster, survivor)
    jobs = Jobs(cluster, UPLOADS, url=survivor)
    paths = [FILES[i % len(FILES)] for i in range(UPLOADS)]
    gateways = [cluster.url, survivor]

    failed: list[BaseException] = []

    def faults() -> None:
        try:
            kill_one_of_each()
        except BaseException as exc:  # raised by the test below
            failed.append(exc)

    def kill_one_of_each() -> None:
        # a worker in the middle of a job
        wait_until(lambda: _started(cluster, "worker-0") > jobs_done(cluster, "worker-0"))
        cluster.kill("worker-0")
        # the gateway that took half the uploads, once they are in
        wait_until(lambda: len(jobs.sids) == UPLOADS)
        cluster.kill("gateway")
        # a bridge while results flow: sessions unfinished, the stream mid-way
        try:
            wait_until(lambda: stream.finals() >= 2)
        except AssertionError:
            cluster.findings.append(f"== no second final: {stream.story()}")
            raise
        unfinished = UPLOADS - len(jobs.finished)
        relayed = _assigned(cluster, "bridge-1", "transcription.results")
        cluster.kill("bridge")
        cluster.findings.append(f"bridge killed with {unfinished} uploads unfinished")
        # the other bridge takes every results partition; then the killed one is back
        wait_until(lambda: _assigned(cluster, "bridge-1", "transcription.results") > relayed)
        cluster.restart("bridge")

    async def transcribe_all() -> list[tuple[Transcript, dict]]:
        clients = (jobs.one_client(p, gateways[i % 2]) for i, p in enumerate(paths))
        try:
            return await asyncio.wait_for(asyncio.gather(*clients), 240)
        except TimeoutError:
            cluster.findings.append(f"== uploads did not finish in 240 s: {jobs.story()}")
            raise AssertionError(cluster.findings[-1]) from None

    stream.start()
    wait_until(lambda: stream.finals() >= 1)  # the stream is under way
    killer = threading.Thread(target=faults)
    killer.start()
    try:
        results = asyncio.run(transcribe_all())
    finally:
        killer.join(60)
        stream.join()
    if failed:
        raise failed[0]
    assert not killer.is_alive(), "the faults did not all happen"
    # the bridges' ingest connections held all along (none took over the other's session)
    lost = [line for line in cluster.log("bridge-1", tail=None).splitlines() if " lost (" in line]
    assert not lost, lost[:3]
    assert len(results) == UPLOADS
    assert_complete(results)
    transcript = stream.transcript()
    sids = [t.sid for t, _ in results] + [transcript.sid]
    asyncio.run(_assert_stored_once(cluster, survivor, sids))
    assert jobs_done(cluster, "worker-1") > 0
    print(f"worker-0 did {jobs_done(cluster, 'worker-0')} jobs before it was killed")


class _LiveStream:
    """A live stream of :data:`UTTERANCES` by the SDK over ``url``, in a thread."""

    def __init__(self, cluster: DistributedPlatform, url: str) -> None:
        self.cluster, self.url = cluster, url
        self.events: list[Message] = []
        self.outcome: list[Transcript | BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(90)  # the end may wait 30 s for chunks a killed bridge held

    def finals(self) -> int:
        assert self._thread.is_alive() or self.outcome, "the stream ended without an outcome"
        if self.outcome and isinstance(self.outcome[0], BaseException):
            raise AssertionError("the stream failed") from self.outcome[0]
        return sum(1 for m in self.events if m.type == "final")

    def story(self) -> str:
        """What the stream's subscriber got, and what the processes logged of it."""
        sid = self.events[0].sid if self.events else "?"
        said = [
            f"{name}: {line[:200]}"
            for name in sorted(self.cluster.processes)
            for line in self.cluster.log(name, tail=None).splitlines()
            if sid in line
        ]
        kinds = [m.type for m in self.events]
        return f"stream {sid}: got {kinds}, outcome {self.outcome}\n" + "\n".join(said)

    def _run(self) -> None:
        pcm, _, _ = joined_utterances()
        try:
            with Client(self.url, self.cluster.api_key, self.cluster.mqtt_url) as client:
                chunks = pcm_chunks(pcm)
                self.outcome.append(client.stream(chunks, speed=1.5, on_event=self.events.append))
        except BaseException as exc:  # reported by transcript()
            self.outcome.append(exc)

    def transcript(self) -> Transcript:
        """The stream's transcript, after checking what its subscriber got: seq
        unbroken, every utterance's final once, the transcript made of them."""
        if not self.outcome:
            raise AssertionError(f"the stream did not complete: {self.story()}")
        transcript = self.outcome[0]
        assert isinstance(transcript, Transcript), transcript
        seqs = [m.seq for m in self.events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        finals = [m for m in self.events if isinstance(m, SegmentMessage) and m.type == "final"]
        texts = [f.segment.text for f in finals]
        assert [f.segment.index for f in finals] == list(range(len(UTTERANCES))), texts
        assert [s.text for s in transcript.segments] == texts
        return transcript


async def _assert_stored_once(cluster: DistributedPlatform, url: str, sids: list[str]) -> None:
    """Each session completed and stored once: its history numbered without a
    gap or repeat and its finals' segments each once, as the stored transcript."""
    async with AsyncClient(url, cluster.api_key, cluster.mqtt_url) as client:
        for sid in sids:
            messages: list[Message] = []
            while True:
                page = await client.history(sid, after=messages[-1].seq if messages else 0)
                messages += page.messages
                if not page.messages or messages[-1].seq >= page.last_seq:
                    break
            seqs = [m.seq for m in messages]
            assert seqs == list(range(1, len(seqs) + 1)), f"{sid}: stored seq {seqs}"
            finals = [m for m in messages if isinstance(m, SegmentMessage) and m.type == "final"]
            indexes = [f.segment.index for f in finals]
            assert indexes == list(range(len(indexes))), f"{sid}: stored finals {indexes}"
            stored = await client.transcript(sid)
            assert stored.status == "completed", sid
            assert [s.text for s in stored.segments] == [f.segment.text for f in finals], sid


def _assigned(cluster: DistributedPlatform, name: str, topic: str) -> int:
    """How often process ``name``'s consumer of ``topic`` was given partitions
    (cooperative rebalancing also logs empty increments: not counted)."""
    pattern = re.escape(topic) + r" .*assigned partitions \[(.*)\]"
    return sum(1 for taken in re.findall(pattern, cluster.log(name, tail=None)) if taken)


def _started(cluster: DistributedPlatform, name: str) -> int:
    return len(re.findall(r"job \S+ started", cluster.log(name, tail=None)))
