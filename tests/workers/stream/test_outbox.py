"""A session's outbox: the checkpoint saved before the messages it covers,
batches out in the order they were handed in, a failed produce as the
session's error, and nothing after a move to another worker."""

from __future__ import annotations

import asyncio

import pytest

from voxwire.bus import MemoryBus
from voxwire.core.errors import BusError
from voxwire.wire.topics import RESULTS_TOPIC, WINDOWS_TOPIC
from voxwire.workers.stream.checkpoints import MemoryCheckpoints, StreamCheckpoint
from voxwire.workers.stream.outbox import Outbox
from voxwire.workers.stream.session import Outbound, Resume
from voxwire_client.messages import (
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    parse_message,
)

pytestmark = pytest.mark.timeout(30)

SID = "ob1"


def progress(seq: int) -> ProgressMessage:
    return ProgressMessage(
        sid=SID, seq=seq, status=SessionStatus.TRANSCRIBING, percent=0, processed_ms=seq
    )


def batch(*seqs: int, chunk: int = 0) -> Outbound:
    """Progress messages ``seqs`` decided together, the point after them at ``chunk``."""
    return Outbound(tuple(progress(s) for s in seqs), Resume(seqs[-1] + 1, chunk=chunk))


class WatchedBus(MemoryBus):
    """Records each result with the checkpoint saved when it was produced;
    results may take a while, or fail from the ``fail_at``-th on."""

    def __init__(
        self, checkpoints: MemoryCheckpoints, *, delay: float = 0.0, fail_at: int = 0
    ) -> None:
        super().__init__()
        self.checkpoints, self.delay, self.fail_at = checkpoints, delay, fail_at
        self.results: list[tuple[Message, StreamCheckpoint | None]] = []
        self.windows = 0

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        if topic == WINDOWS_TOPIC:
            self.windows += 1
        if topic != RESULTS_TOPIC:
            return
        if self.fail_at and len(self.results) + 1 >= self.fail_at:
            raise BusError("results refused")
        await asyncio.sleep(self.delay)
        saved = await self.checkpoints.load(key)
        self.results.append((parse_message(value), saved))

    @property
    def seqs(self) -> list[int]:
        return [message.seq for message, _ in self.results]


def outbox(bus: WatchedBus, owned: list[bool] | None = None) -> Outbox:
    mine = owned if owned is not None else [True]
    return Outbox(SID, b"start", bus, bus.checkpoints, owned=lambda: mine[0])


async def test_each_message_goes_out_after_the_checkpoint_that_covers_it() -> None:
    bus = WatchedBus(MemoryCheckpoints())
    box = outbox(bus)
    assert await box.send(batch(2))
    assert await box.send(batch(3, 4, 5, chunk=7))
    assert bus.seqs == [2, 3, 4, 5]
    for message, saved in bus.results:
        assert saved is not None and not saved.done
        assert saved.resume.next_seq > message.seq  # saved before the message went out
        covered = [saved.last, *saved.resume.pending]
        assert message in covered  # a successor sends it again: nothing is lost
    saved = bus.results[-1][1]
    assert saved is not None and saved.last is not None and saved.last.seq == 3
    assert [m.seq for m in saved.resume.pending] == [4, 5]
    assert box.settled == 7  # records before chunk 7 may be committed


async def test_batches_go_out_in_the_order_they_were_handed_in() -> None:
    """The place in line is taken when a batch is handed in, before anything is
    awaited: the seq order, whichever task awaits which batch first."""
    bus = WatchedBus(MemoryCheckpoints(), delay=0.01)
    box = outbox(bus)
    first, second, third = box.send(batch(2)), box.send(batch(3, 4)), box.send(batch(5))
    assert await third and await first and await second
    assert bus.seqs == [2, 3, 4, 5]
    # from several tasks at once, each handing in as its seqs are given
    handed = [asyncio.ensure_future(box.send(batch(seq))) for seq in range(6, 12)]
    assert await asyncio.gather(*reversed(handed)) == [True] * 6
    assert bus.seqs == list(range(2, 12))
    saved = await bus.checkpoints.load(SID)
    assert saved is not None and saved.resume.next_seq == 12  # the last one's, not an older


async def test_a_failing_produce_is_the_sessions_error_and_stops_its_outbox() -> None:
    checkpoints = MemoryCheckpoints()
    bus = WatchedBus(checkpoints, fail_at=2)
    box = outbox(bus)
    assert await box.send(batch(2))
    failing = box.send(batch(3, 4, chunk=9))
    waiting = box.send(batch(5))  # in line behind the batch that fails
    with pytest.raises(BusError, match="results refused") as caught:
        await failing
    assert caught.value.sid == SID and box.failed is caught.value
    with pytest.raises(BusError):
        await waiting
    with pytest.raises(BusError):  # nothing more: every later hand-in raises it again
        await box.send(batch(6))
    with pytest.raises(BusError):
        await box.close(Resume(7))
    assert bus.seqs == [2]
    saved = await checkpoints.load(SID)
    # the last checkpoint is the failed batch's, never marked done: another
    # worker sends 3 again, replays 4 and goes on
    assert saved is not None and not saved.done and saved.last is not None
    assert saved.last.seq == 3 and [m.seq for m in saved.resume.pending] == [4]
    assert box.settled == 9


async def test_nothing_goes_out_once_the_session_moved() -> None:
    checkpoints, owned = MemoryCheckpoints(), [True]
    bus = WatchedBus(checkpoints)
    box = outbox(bus, owned)
    assert await box.send(batch(2))
    owned[0] = False  # a rebalance gave its partition to another worker
    assert not await box.send(batch(3))
    owned[0] = True
    assert not await box.send(batch(4)) and not await box.close(Resume(5))
    assert box.moved and bus.seqs == [2]
    saved = await checkpoints.load(SID)
    assert saved is not None and saved.resume.next_seq == 3  # left for the new owner


async def test_a_resent_message_and_the_last_checkpoint_keep_their_places() -> None:
    checkpoints = MemoryCheckpoints()
    bus = WatchedBus(checkpoints)
    box = outbox(bus)
    loaded = StreamCheckpoint(b"start", Resume(3, pending=()), progress(2))
    resent, sent = box.resend(loaded), box.send(batch(3))
    closed = box.close(Resume(4, finished=True))
    assert await closed and await sent and await resent
    assert bus.seqs == [2, 3]
    saved = await checkpoints.load(SID)
    assert saved is not None and saved.done and saved.last is None


async def test_a_final_sends_the_windows_it_changed() -> None:
    bus = WatchedBus(MemoryCheckpoints())
    box = outbox(bus)
    segments = [
        SegmentData(id=f"{SID}-{i}", index=i, start_ms=i * 2000, end_ms=i * 2000 + 1500, text="hi")
        for i in range(2)
    ]
    finals = [
        SegmentMessage(sid=SID, seq=2 + i, type="final", segment=s) for i, s in enumerate(segments)
    ]
    assert await box.send(Outbound((finals[0],), Resume(3, finals=(segments[0],))))
    assert bus.windows == 0  # a window with a single final is not sent
    assert await box.send(Outbound((finals[1], progress(4)), Resume(5, finals=(*segments,))))
    assert bus.seqs == [2, 3, 4] and bus.windows == 1
