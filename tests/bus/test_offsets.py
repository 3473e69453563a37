"""OffsetTracker: commit positions never skip a record that is still in flight."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxwire.bus.offsets import OffsetTracker

pytestmark = pytest.mark.timeout(30)


def test_in_order_finishing_advances_one_by_one() -> None:
    tracker = OffsetTracker()
    for offset in range(3):
        tracker.started(0, offset)
    assert [tracker.finished(0, offset) for offset in range(3)] == [1, 2, 3]


def test_a_later_record_does_not_commit_past_an_earlier_one() -> None:
    tracker = OffsetTracker()
    for offset in (10, 11, 12):
        tracker.started(0, offset)
    assert tracker.finished(0, 12) is None  # 10 and 11 still run
    assert tracker.finished(0, 11) is None
    assert tracker.finished(0, 10) == 13  # everything up to 12 is done
    assert tracker.position(0) == 13


def test_out_of_order_finishing_commits_the_lowest_unfinished_offset() -> None:
    tracker = OffsetTracker()
    for offset in range(5):
        tracker.started(0, offset)
    assert tracker.finished(0, 0) == 1
    assert tracker.finished(0, 2) is None
    assert tracker.finished(0, 1) == 3  # 3 is the lowest still in flight
    assert tracker.finished(0, 4) is None
    assert tracker.finished(0, 3) == 5
    assert tracker.in_flight(0) == 0


def test_partitions_are_independent() -> None:
    tracker = OffsetTracker()
    tracker.started(0, 0)
    tracker.started(1, 7)
    tracker.started(1, 8)
    assert tracker.finished(1, 8) is None
    assert tracker.finished(0, 0) == 1
    assert tracker.finished(1, 7) == 9


def test_gaps_between_offsets_are_not_waited_for() -> None:
    """Compacted topics and transaction markers leave holes in the offsets."""
    tracker = OffsetTracker()
    tracker.started(0, 3)
    tracker.started(0, 9)
    assert tracker.finished(0, 3) == 9
    assert tracker.finished(0, 9) == 10


def test_the_first_offset_is_not_an_advance() -> None:
    """A position equal to where consumption began gains nothing."""
    tracker = OffsetTracker()
    tracker.started(0, 5)
    tracker.started(0, 6)
    assert tracker.finished(0, 6) is None
    assert tracker.position(0) == 5


def test_unknown_and_repeated_finishes_are_ignored() -> None:
    tracker = OffsetTracker()
    assert tracker.finished(0, 0) is None
    tracker.started(0, 0)
    assert tracker.finished(0, 1) is None
    assert tracker.finished(0, 0) == 1
    assert tracker.finished(0, 0) is None


def test_revoked_partitions_are_forgotten() -> None:
    tracker = OffsetTracker()
    for partition in (0, 1):
        tracker.started(partition, 0)
        tracker.started(partition, 1)
    tracker.revoke([0])
    assert tracker.in_flight(0) == 0
    assert tracker.position(0) is None
    # records of the revoked partition that finish afterwards are not committed
    assert tracker.finished(0, 0) is None
    assert tracker.finished(0, 1) is None
    assert tracker.finished(1, 0) == 1


def test_a_reassigned_partition_starts_afresh() -> None:
    tracker = OffsetTracker()
    tracker.started(0, 0)
    tracker.started(0, 1)
    tracker.revoke([0])
    # the partition comes back; the group redelivers from its committed offset
    tracker.started(0, 0)
    assert tracker.finished(0, 1) is None  # a record of the old assignment
    assert tracker.finished(0, 0) == 1


@given(st.data())
def test_the_position_never_passes_a_record_in_flight(data: st.DataObject) -> None:
    offsets = sorted(data.draw(st.sets(st.integers(0, 200), min_size=1, max_size=40)))
    order = data.draw(st.permutations(offsets))
    tracker = OffsetTracker()
    in_flight: set[int] = set()
    started = 0
    committed = offsets[0]
    for offset in order:
        # start records in offset order, as a consumer hands them out,
        # at least up to the one that finishes next
        while offset not in in_flight:
            tracker.started(0, offsets[started])
            in_flight.add(offsets[started])
            started += 1
        in_flight.discard(offset)
        position = tracker.finished(0, offset)
        if position is not None:
            assert position > committed
            committed = position
        lowest = min(in_flight, default=None)
        assert lowest is None or committed <= lowest
        done_below = [o for o in offsets[:started] if o < committed]
        assert all(o not in in_flight for o in done_below)
    assert committed == offsets[-1] + 1
