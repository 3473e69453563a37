"""The ingest's gate on a shared broker: which sessions' audio is this
installation's, asked once per sid, decided in arrival order."""

from __future__ import annotations

import asyncio

import pytest

from voxwire.bridge.sessions_gate import SessionGate, Verdicts
from voxwire.core.errors import StoreError

pytestmark = pytest.mark.timeout(30)


def test_ours_is_kept_and_theirs_is_believed_briefly() -> None:
    verdicts = Verdicts(capacity=10, negative_ttl_s=2.0)
    assert verdicts.get("a", now=0.0) is None
    verdicts.put("a", True, now=0.0)
    verdicts.put("b", False, now=0.0)
    assert verdicts.get("a", now=1e9) is True
    assert verdicts.get("b", now=1.9) is False
    assert verdicts.get("b", now=2.0) is None  # asked again


def test_the_least_recently_seen_sid_goes_first() -> None:
    verdicts = Verdicts(capacity=2)
    verdicts.put("a", True, now=0.0)
    verdicts.put("b", True, now=0.0)
    assert verdicts.get("a", now=0.0) is True  # a seen after b
    verdicts.put("c", True, now=0.0)
    assert (verdicts.get("a", 0.0), verdicts.get("b", 0.0), verdicts.get("c", 0.0)) == (
        True,
        None,
        True,
    )


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Verdicts(capacity=0)


class Store:
    """Sessions by sid; a lookup waits while ``held`` is clear, and fails while
    ``failing`` is above zero, as a store that is away does."""

    def __init__(self, *sids: str) -> None:
        self.sids = set(sids)
        self.held = asyncio.Event()
        self.held.set()
        self.failing = 0

    async def is_ours(self, sid: str) -> bool:
        await self.held.wait()
        if self.failing:
            self.failing -= 1
            raise StoreError("PostgreSQL is away")
        return sid in self.sids


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_messages_that_come_during_the_lookup_keep_their_order() -> None:
    store = Store("ours")
    decided: list[tuple[str, bool]] = []
    gate: SessionGate[str] = SessionGate(store.is_ours, lambda m, ours: decided.append((m, ours)))
    store.held.clear()
    gate.admit("ours", "ours/0")
    gate.admit("theirs", "theirs/0")
    gate.admit("ours", "ours/1")
    await _settle()
    assert decided == []  # nothing overtakes the lookup
    store.held.set()
    await _settle()
    gate.admit("ours", "ours/2")  # known now: decided at once
    gate.admit("theirs", "theirs/1")
    assert decided == [
        ("ours/0", True),
        ("ours/1", True),
        ("theirs/0", False),
        ("ours/2", True),
        ("theirs/1", False),
    ]
    assert gate.lookups == 2  # once per sid


async def test_a_failed_lookup_holds_the_messages_and_is_asked_again() -> None:
    store = Store("ours")
    store.failing = 2
    decided: list[str] = []
    gate: SessionGate[str] = SessionGate(
        store.is_ours, lambda m, ours: decided.append(m), retry_s=(0.01, 0.02)
    )
    gate.admit("ours", "ours/0")
    gate.admit("ours", "ours/1")
    async with asyncio.timeout(5):
        while len(decided) < 2:
            await asyncio.sleep(0.01)
    assert decided == ["ours/0", "ours/1"]
    assert gate.lookups == 3


async def test_a_foreign_sid_is_asked_again_once_its_answer_is_old() -> None:
    store = Store()
    now = [0.0]
    decided: list[tuple[str, bool]] = []
    gate: SessionGate[str] = SessionGate(
        store.is_ours,
        lambda m, ours: decided.append((m, ours)),
        verdicts=Verdicts(negative_ttl_s=2.0),
        clock=lambda: now[0],
    )
    gate.admit("late", "late/0")
    await _settle()
    gate.admit("late", "late/1")
    store.sids.add("late")  # cannot happen (a session is stored before its sid is known)
    now[0] = 2.5
    gate.admit("late", "late/2")
    await _settle()
    assert decided == [("late/0", False), ("late/1", False), ("late/2", True)]
    assert gate.lookups == 2
