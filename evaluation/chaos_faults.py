"""Faults for the chaos soak (``benchmarks/bench_chaos.py``), injected into a
:class:`~evaluation.distributed.DistributedPlatform` and the servers of
``scripts/services.sh``.

A fault kind names what happens and to what:

- ``kill-<role>``: SIGKILL of one process of the role (gateway, bridge, worker),
  no goodbye to Kafka or the broker; it is started again after
  :data:`RESTART_DELAY_S`, as Kubernetes restarts a container that died.
- ``term-<role>``: SIGTERM (the process drains and exits, SIGKILL after 20 s),
  then started again: a rolling update.
- ``restart-<server>``: ``scripts/services.sh restart <server>`` of Kafka,
  PostgreSQL, Redis, Mosquitto or OpenSearch; the servers are the ones the
  environment names (``VOXWIRE_SERVICES_DIR`` and the ports), so a soak on a
  private set never touches shared ones.
- ``freeze-worker``: SIGSTOP of a worker for 5-15 s, then SIGCONT: a process
  that looks alive and does nothing (a long GC pause, a stalled node).

A process that exits by itself (a fault it did not survive) is started again
by :meth:`FaultDriver.supervise`, as Kubernetes restarts a container, and
recorded as a :class:`Crash` with the last lines of its log.

The schedule is drawn from ``random.Random(seed)``: the kinds in shuffled
rounds (each kind once per round, so a short run still covers them), the gaps
between faults uniform in [0.5, 1.5] x the mean gap, the target among the
role's processes. The same seed gives the same schedule; what the platform
does in between is not repeatable (threads, servers, the machine's load).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from evaluation.distributed import SERVICES, DistributedPlatform

ROLES = ("gateway", "bridge", "worker")
SERVERS = ("kafka", "postgres", "redis", "mosquitto", "opensearch")
KINDS = (
    *(f"kill-{role}" for role in ROLES),
    *(f"term-{role}" for role in ROLES),
    *(f"restart-{server}" for server in SERVERS),
    "freeze-worker",
)
RESTART_DELAY_S = 2.0
"""How long a killed process stays down before it is started again."""
FREEZE_S = (5.0, 15.0)


def parse_kinds(text: str) -> tuple[str, ...]:
    """``--faults``: comma-separated kinds, a role or server alone for all its
    kinds (``worker`` = kill-, term- and freeze-worker), or ``all``."""
    if text.strip() == "all":
        return KINDS
    chosen: list[str] = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        matching = [k for k in KINDS if k == word or k.split("-", 1)[1] == word]
        if not matching:
            raise SystemExit(
                f"unknown fault kind {word!r}: pick among {', '.join(KINDS)}, a role "
                f"({', '.join(ROLES)}), a server ({', '.join(SERVERS)}) or all"
            )
        chosen += [k for k in matching if k not in chosen]
    return tuple(chosen)


@dataclass
class Fault:
    """One injected fault; times in seconds since the soak began."""

    kind: str
    target: str
    at: float
    """When it was injected."""
    over: float = 0.0
    """When its action had ended: the process started again, the server back,
    the worker thawed."""
    error: str = ""
    """What went wrong injecting it (the soak goes on)."""


@dataclass
class Crash:
    """A process that exited on its own (not by a fault's hand)."""

    target: str
    at: float
    code: int | None
    said: str
    """The last lines of its log."""


@dataclass
class FaultDriver:
    """Injects :attr:`kinds` at random times into ``platform`` until stopped."""

    platform: DistributedPlatform
    kinds: tuple[str, ...]
    rng: random.Random
    mean_gap_s: float
    started: float = field(default_factory=time.monotonic)
    faults: list[Fault] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a fault acts on a process, so that :meth:`supervise` leaves it be."""

    def now(self) -> float:
        return time.monotonic() - self.started

    def schedule(self, first_s: float, until_s: float) -> list[tuple[float, str]]:
        """(time, kind) pairs from ``first_s`` to ``until_s``, kinds in shuffled rounds."""
        plan: list[tuple[float, str]] = []
        at, round_ = first_s, list[str]()
        while at < until_s:
            if not round_:
                round_ = list(self.kinds)
                self.rng.shuffle(round_)
            plan.append((at, round_.pop()))
            at += self.mean_gap_s * self.rng.uniform(0.5, 1.5)
        return plan

    def run(self, plan: list[tuple[float, str]], stop: threading.Event, until_s: float) -> None:
        """Inject ``plan`` (blocking: run it in a thread) until ``stop`` is set;
        a fault due after ``until_s`` (a slow server restart delayed it) is left out."""
        for at, kind in plan:
            while self.now() < at:
                if stop.wait(max(0.0, min(0.5, at - self.now()))):
                    return
            if self.now() > until_s:
                return
            self.inject(kind)

    def inject(self, kind: str) -> Fault:
        action, what = kind.split("-", 1)
        fault = Fault(kind, what, self.now())
        self.faults.append(fault)
        try:
            if action == "restart":
                restart_server(what)
            else:
                with self.lock:
                    names = sorted(n for n in self.platform.processes if n.split("-")[0] == what)
                    fault.target = self.rng.choice(names)
                    self._act(action, fault.target)
        except Exception as exc:  # recorded, the soak goes on
            fault.error = f"{type(exc).__name__}: {exc}"
        fault.over = self.now()
        return fault

    def _act(self, action: str, target: str) -> None:
        if self.platform.processes[target].poll() is not None:
            self._respawn(target)  # it had exited on its own: the fault hits the new one
        if action == "kill":
            self.platform.kill(target)
            time.sleep(RESTART_DELAY_S)
            self.platform.restart(target)
        elif action == "term":
            self.platform.restart(target)
        else:
            self._freeze(target)

    def supervise(self, stop: threading.Event) -> None:
        """Until ``stop``: start again every process that exited on its own."""
        while not stop.wait(0.5):
            with self.lock:
                for name, process in list(self.platform.processes.items()):
                    if process.poll() is not None:
                        self._respawn(name)

    def _respawn(self, name: str) -> None:
        code = self.platform.processes[name].poll()
        said = "\n".join(self.platform.log(name, tail=1500).splitlines()[-6:])
        self.crashes.append(Crash(name, self.now(), code, said))
        self.platform.restart(name)

    def _freeze(self, name: str) -> None:
        pid = self.platform.processes[name].pid
        os.killpg(pid, signal.SIGSTOP)
        try:
            time.sleep(self.rng.uniform(*FREEZE_S))
        finally:
            os.killpg(pid, signal.SIGCONT)


def restart_server(name: str) -> None:
    """``scripts/services.sh restart <name>`` on the servers the environment names."""
    done = subprocess.run(
        [str(SERVICES), "restart", name], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"services.sh restart {name}: {done.stderr.strip()[-400:]}")
