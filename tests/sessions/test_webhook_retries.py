"""The retry schedule of webhook deliveries: doubling, capped, jittered."""

from __future__ import annotations

import pytest

from voxwire.sessions.webhooks import retry_delay


def test_the_wait_doubles_up_to_the_cap() -> None:
    waits = [retry_delay(n, 10.0, 3600.0, jitter=1.0) for n in range(1, 12)]
    assert waits[:6] == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]
    assert waits[-1] == 3600.0 and max(waits) == 3600.0
    assert waits == sorted(waits)


def test_jitter_takes_up_to_half_off() -> None:
    assert retry_delay(3, 10.0, 3600.0, jitter=0.0) == 20.0
    assert retry_delay(3, 10.0, 3600.0, jitter=0.5) == 30.0
    assert retry_delay(3, 10.0, 3600.0, jitter=1.0) == 40.0


def test_a_very_late_attempt_does_not_overflow() -> None:
    assert retry_delay(10_000, 10.0, 3600.0, jitter=1.0) == 3600.0


@pytest.mark.parametrize(("attempts", "jitter"), [(0, 0.5), (1, -0.1), (1, 1.5)])
def test_nonsense_is_refused(attempts: int, jitter: float) -> None:
    with pytest.raises(ValueError):
        retry_delay(attempts, 10.0, 60.0, jitter)
