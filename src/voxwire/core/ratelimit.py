"""Rate limits: a token bucket per caller, so one tenant (or one stream) cannot
crowd out the others.

Pure code with an injected clock::

    limits = RateLimits(rate_per_s=20, burst=60)
    wait = limits.take("tenant-1")      # 0.0: go on; else seconds until allowed

A bucket holds up to ``burst`` tokens and gains ``rate_per_s`` a second; each
call takes one (or ``cost``). Buckets of callers not seen for a while are
forgotten (at most ``max_callers`` are kept, least recently used first out).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from voxwire.core.errors import VoxwireError


class RateLimitedError(VoxwireError):
    """Too many requests from one caller; ``retry_after_s`` says when to try again."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: float, sid: str | None = None) -> None:
        super().__init__(message, hint=f"retry in {max(retry_after_s, 0.1):.1f} s", sid=sid)
        self.retry_after_s = retry_after_s


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RateLimits:
    def __init__(
        self,
        rate_per_s: float,
        burst: float,
        *,
        max_callers: int = 100_000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate_per_s > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._max_callers = max_callers
        self._now = now
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, caller: str, cost: float = 1.0) -> float:
        """Take ``cost`` tokens: 0.0 when allowed, else the seconds to wait (nothing taken)."""
        now = self._now()
        bucket = self._buckets.pop(caller, None) or _Bucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate_per_s)
        bucket.at = now
        self._buckets[caller] = bucket
        if len(self._buckets) > self._max_callers:
            self._buckets.popitem(last=False)
        if bucket.tokens >= cost:
            bucket.tokens -= cost
            return 0.0
        return (cost - bucket.tokens) / self.rate_per_s
