"""File jobs at a lower CPU priority than live streams.

Live finals are waited for by someone; file jobs are not, as long as they move.
On a machine whose cores both do, the scheduler should give the cores to live
decoding first. Linux keeps a nice value per thread, and a thread starts with
the nice value of the thread that created it, so:

- a file engine is created in a thread that lowered its own priority first
  (:func:`created_at_nice`): the compute threads an engine makes with its model
  (CTranslate2's workers) inherit it;
- the threads that run file jobs lower theirs when they start
  (:func:`lower_this_thread`, a thread pool's initializer): the threads
  whisper.cpp makes for each call inherit it.

Live engines keep the process's priority. A process may always lower its own
threads' priority; where the system has no per-thread nice values, nothing
changes (logged once).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def lower_this_thread(nice: int) -> None:
    """Lower the calling thread's CPU priority by ``nice`` (0: leave it)."""
    if nice <= 0:
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except (OSError, AttributeError) as exc:
        log.info("file jobs run at the live streams' CPU priority: %s", exc)


def created_at_nice(factory: Callable[[], T], nice: int) -> T:
    """``factory()`` called in a thread of its own that first lowered its priority
    by ``nice``: what it creates (an engine's compute threads) inherits it."""
    if nice <= 0:
        return factory()
    made: list[T] = []
    failed: list[BaseException] = []

    def create() -> None:
        lower_this_thread(nice)
        try:
            made.append(factory())
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=create, name="load file engine")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]
