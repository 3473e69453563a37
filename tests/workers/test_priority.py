"""File engines run below live streams on the CPU: a thread's lowered priority is
inherited by the threads it creates, and so by a faster-whisper model's compute
threads when the model is loaded there."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from voxwire.workers.engines import create_engine
from voxwire.workers.priority import created_at_nice, lower_this_thread


def _nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def _threads_at(nice: int) -> set[int]:
    """This process's threads whose nice value is ``nice`` (one that ends while
    they are read is left out)."""
    found = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[16]) == nice:  # field 19 of stat: nice
            found.add(int(task.name))
    return found


def test_a_lowered_thread_and_the_threads_it_starts_run_lower() -> None:
    base = _nice_of(threading.get_native_id())
    seen: dict[str, int] = {}

    def child() -> None:
        seen["child"] = _nice_of(threading.get_native_id())

    def factory() -> str:
        seen["creator"] = _nice_of(threading.get_native_id())
        thread = threading.Thread(target=child)
        thread.start()
        thread.join()
        return "made"

    assert created_at_nice(factory, 7) == "made"
    assert seen == {"creator": base + 7, "child": base + 7}
    assert _nice_of(threading.get_native_id()) == base  # the caller's is unchanged


def test_nice_zero_leaves_the_thread_as_it_was() -> None:
    outcome: list[int] = []

    def run() -> None:
        lower_this_thread(0)
        outcome.append(_nice_of(threading.get_native_id()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert outcome == [_nice_of(threading.get_native_id())]


def test_a_faster_whisper_model_loaded_lower_computes_on_lower_threads() -> None:
    base = _nice_of(threading.get_native_id())
    before = _threads_at(base + 5)
    engine = created_at_nice(lambda: create_engine("faster-whisper", "tiny.en", threads=1), 5)
    try:
        assert _threads_at(base + 5) - before  # the model's own threads
    finally:
        engine.close()
