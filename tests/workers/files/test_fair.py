"""Engine time shared among tenants (start-time fair queuing): a tenant's backlog
delays another tenant's next job by at most the job in service; backlogs share
audio seconds; a session's jobs run one at a time, in order."""

from __future__ import annotations

from voxwire.workers.files.fair import FairQueue


def _backlog(queue: FairQueue[str], tenant: str, count: int, cost_s: float) -> None:
    for i in range(count):
        queue.push(f"{tenant}{i}", tenant=tenant, session=f"{tenant}{i}", cost_s=cost_s)


def test_a_job_of_a_quiet_tenant_runs_next_after_a_thousand_queued_by_another() -> None:
    queue: FairQueue[str] = FairQueue()
    _backlog(queue, "a", 1000, cost_s=60)
    assert [queue.pop(), queue.pop()] == ["a0", "a1"]
    queue.push("b0", tenant="b", session="b0", cost_s=600)
    assert queue.pop() == "b0"
    assert queue.pop() == "a2"


def test_without_other_tenants_jobs_run_in_arrival_order() -> None:
    queue: FairQueue[str] = FairQueue()
    _backlog(queue, "a", 5, cost_s=3)
    assert [queue.pop() for _ in range(5)] == ["a0", "a1", "a2", "a3", "a4"]
    assert queue.pop() is None


def test_two_backlogs_share_audio_seconds_not_job_counts() -> None:
    queue: FairQueue[str] = FairQueue()
    _backlog(queue, "a", 100, cost_s=10)
    _backlog(queue, "b", 100, cost_s=40)
    served = {"a": 0.0, "b": 0.0}
    for _ in range(50):
        item = queue.pop()
        assert item is not None
        served[item[0]] += 10 if item[0] == "a" else 40
    assert abs(served["a"] - served["b"]) <= 40  # within one job of each other


def test_weights_share_in_proportion() -> None:
    queue: FairQueue[str] = FairQueue(weights={"gold": 3.0})
    _backlog(queue, "gold", 60, cost_s=10)
    _backlog(queue, "std", 60, cost_s=10)
    first = [queue.pop() for _ in range(40)]
    gold = sum(1 for item in first if item and item.startswith("gold"))
    assert 29 <= gold <= 31


def test_an_idle_tenant_earns_no_credit() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("b0", tenant="b", session="b0", cost_s=10)
    assert queue.pop() == "b0"
    _backlog(queue, "a", 50, cost_s=10)
    for _ in range(40):
        queue.pop()
    _backlog(queue, "b", 20, cost_s=10)  # b was idle for 40 of a's jobs
    following = [queue.pop() for _ in range(10)]
    assert sum(1 for item in following if item and item[0] == "b") <= 6


def test_a_sessions_jobs_never_overlap_or_overtake() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("s-first", tenant="a", session="s", cost_s=5)
    queue.push("s-second", tenant="a", session="s", cost_s=5)
    queue.push("t-only", tenant="b", session="t", cost_s=5)
    assert queue.pop() == "s-first"
    assert queue.pop(running={"s"}) == "t-only"
    assert queue.pop(running={"s", "t"}) is None  # s's second waits for its first
    assert queue.pop(running=set()) == "s-second"


def test_backlog_counts_waiting_jobs_by_tenant() -> None:
    queue: FairQueue[str] = FairQueue()
    _backlog(queue, "a", 3, cost_s=1)
    _backlog(queue, "b", 1, cost_s=1)
    assert queue.backlog() == {"a": 3, "b": 1}
    assert len(queue) == 4
