"""A consumer that does not rejoin is replaced, and each replacement is given twice
the time the one before had: replacing at a fixed pace restarted the group's
rebalance before it could finish, and no consumer ever got its partitions back."""

from __future__ import annotations

import time

from voxwire.bus.kafka_membership import MAX_DOUBLINGS, Membership


def test_each_replacement_waits_twice_as_long_until_partitions_come_back() -> None:
    membership = Membership({}, rejoin_s=1.0)
    membership.lost()
    assert membership.wait_s() == 1.0
    waits = []
    for _ in range(MAX_DOUBLINGS + 2):
        membership.renewed()
        waits.append(membership.wait_s())
    assert waits == [2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    membership.assigned()
    assert membership.wait_s() == 1.0 and not membership.overdue()


def test_a_replacement_is_overdue_only_after_its_own_wait() -> None:
    membership = Membership({}, rejoin_s=1.0)
    membership.lost()
    membership.renewed()  # the second consumer: 2 s
    membership.lost_at = time.monotonic() - 1.5
    assert not membership.overdue()
    membership.lost_at = time.monotonic() - 2.5
    assert membership.overdue()
