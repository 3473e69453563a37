"""The chaos soak's audit: what the clients saw, set against what the platform
kept, and the figures per fault kind.

Per session ``s`` (indexes are the ``segment.index`` of ``final`` messages):

- ``R``: the finals its subscriber received (the SDK's ``events``: ``seq``
  dedupe, gaps fetched from the history API), ``S``: the finals the store
  holds (``messages_after``, which the history API serves), ``E``: the finals
  expected: for a stream, the utterances it played (one final each, 1 s of
  silence between them); for an upload, the finals the same file gave in the
  fault-free warm-up.
- **lost** = ``|S - R|`` (stored, never delivered) + ``max(0, E - |S | R|)``
  (expected, neither stored nor delivered).
- **duplicated** = finals received beyond one per index, after ``seq`` dedupe
  (the same final under two ``seq``), plus the same among the stored ones.
- **gaps** = ``seq`` numbers missing from the stored history below its last,
  plus ``seq`` jumps the subscriber was left with.
- **unfinished** = the stored session is not ``completed`` (failed, or still
  open after the drain), or its subscriber never got the terminal message.
- **search missing** = a completed session with finals whose first final's
  words (a quoted phrase, at most 4 words) the search API does not find in it.
- **retained stale** = the retained message on ``transcription/<sid>/result``
  is missing or not the terminal ``transcript`` of a completed session.
- **history mismatch** = the history API's ``seq`` list differs from the store's.

A session counts under every fault kind injected while it was open (from its
start to its subscriber's end); ``none`` is the sessions no fault touched.
The **recovery time** of a fault is from its injection to the first final (or
upload completion) a subscriber received after the fault's action was over
(the process started again, the server back, the worker thawed).
"""

from __future__ import annotations

import itertools
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from evaluation.chaos_faults import Crash, Fault

TERMINAL_TYPES = ("transcript",)


@dataclass
class Observed:
    """One session as its client saw it; times in seconds since the soak began."""

    kind: str
    """``stream`` or ``upload``."""
    source: str
    expected: int
    started: float
    sid: str = ""
    ended: float | None = None
    events: list[tuple[float, int, str, int | None]] = field(default_factory=list)
    """(time, seq, type, segment index of a final) as the subscriber got them."""
    error: str = ""

    def received(self) -> list[int]:
        return [index for _, _, kind, index in self.events if kind == "final" and index is not None]

    def completed(self) -> bool:
        return any(kind in TERMINAL_TYPES for _, _, kind, _ in self.events)


@dataclass
class Stored:
    """One session as the platform kept it."""

    status: str
    seqs: list[int]
    finals: list[int]
    first_final: str
    history_seqs: list[int] | None = None
    retained: str = ""
    """The ``type`` of the retained result message ('' when none)."""
    found: bool | None = None
    """Whether search finds its first final (None: not asked)."""


@dataclass
class Verdict:
    sid: str
    finals: int = 0
    lost: int = 0
    duplicated: int = 0
    gaps: int = 0
    unfinished: bool = False
    search_missing: bool = False
    retained_stale: bool = False
    history_mismatch: bool = False


def judge(seen: Observed, kept: Stored | None) -> Verdict:
    verdict = Verdict(seen.sid or "?")
    received = seen.received()
    r, s = set(received), set(kept.finals if kept else ())
    verdict.finals = len(r)
    verdict.lost = len(s - r) + max(0, seen.expected - len(s | r))
    stored_finals = kept.finals if kept else []
    verdict.duplicated = (len(received) - len(r)) + (len(stored_finals) - len(s))
    got = [seq for _, seq, _, _ in seen.events]
    verdict.gaps = sum(1 for a, b in itertools.pairwise(got) if b > a + 1)
    if kept:
        top = max(kept.seqs, default=0)
        verdict.gaps += top - len(set(kept.seqs))
        verdict.history_mismatch = kept.history_seqs is not None and kept.history_seqs != kept.seqs
        verdict.search_missing = kept.found is False
        verdict.retained_stale = kept.status == "completed" and kept.retained != "transcript"
    verdict.unfinished = kept is None or kept.status != "completed" or not seen.completed()
    return verdict


def recovery_times(faults: list[Fault], sessions: list[Observed], end: float) -> list[float | None]:
    """Per fault: seconds from injection to the first final or completion a
    subscriber got after the fault was over; None when none came before ``end``."""
    marks = sorted(
        t for seen in sessions for t, _, kind, _ in seen.events if kind in ("final", "transcript")
    )
    out: list[float | None] = []
    for fault in faults:
        after = next((t for t in marks if t >= fault.over), None)
        out.append(None if after is None or after > end else round(after - fault.at, 2))
    return out


def table(
    faults: list[Fault],
    sessions: list[Observed],
    verdicts: dict[int, Verdict],
    end: float,
    crashes: list[Crash],
) -> list[dict[str, Any]]:
    """One row per fault kind (then ``none`` and ``all``): faults, sessions
    touched, their finals, lost, duplicated, gaps, unfinished, search missing,
    recovery p50/max (s), faults with no recovery seen, and the processes that
    exited on their own after a fault of the kind (the last fault before)."""
    recoveries = recovery_times(faults, sessions, end)
    blamed = [
        max((f for f in faults if f.at <= c.at), key=lambda f: f.at, default=None) for c in crashes
    ]
    kinds = sorted({f.kind for f in faults})
    rows = []
    for kind in [*kinds, "none", "all"]:
        mine = [f for f in faults if f.kind == kind] if kind not in ("none", "all") else []
        if kind == "all":
            touched = list(range(len(sessions)))
            mine = faults
        elif kind == "none":
            touched = [i for i, s in enumerate(sessions) if not _touching(faults, s, end)]
        else:
            touched = [i for i, s in enumerate(sessions) if _touching(mine, s, end)]
        times = [r for f, r in zip(faults, recoveries, strict=True) if f in mine]
        done = [t for t in times if t is not None]
        vs = [verdicts[i] for i in touched]
        rows.append(
            {
                "kind": kind,
                "faults": len(mine),
                "sessions": len(vs),
                "finals": sum(v.finals for v in vs),
                "lost": sum(v.lost for v in vs),
                "duplicated": sum(v.duplicated for v in vs),
                "gaps": sum(v.gaps for v in vs),
                "unfinished": sum(v.unfinished for v in vs),
                "search_missing": sum(v.search_missing for v in vs),
                "recovery_p50_s": round(statistics.median(done), 1) if done else None,
                "recovery_max_s": max(done) if done else None,
                "not_recovered": len(times) - len(done),
                "crashes": sum(
                    1 for b in blamed if kind == "all" or (b.kind == kind if b else kind == "none")
                ),
            }
        )
    return rows


def _touching(faults: list[Fault], seen: Observed, end: float) -> bool:
    until = seen.ended if seen.ended is not None else end
    return any(seen.started <= f.at <= until for f in faults)


COLUMNS = (
    ("kind", "fault kind"),
    ("faults", "faults"),
    ("sessions", "sessions"),
    ("finals", "finals"),
    ("lost", "lost"),
    ("duplicated", "duplicated"),
    ("gaps", "seq gaps"),
    ("unfinished", "unfinished"),
    ("search_missing", "not in search"),
    ("recovery_p50_s", "recovery p50 s"),
    ("recovery_max_s", "recovery max s"),
    ("not_recovered", "no recovery"),
    ("crashes", "processes exited"),
)


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = [
        "| " + " | ".join("-" if r[key] is None else str(r[key]) for key, _ in COLUMNS) + " |"
        for r in rows
    ]
    return "\n".join([head, rule, *body])


def search_phrase(text: str) -> str:
    """A quoted phrase of at most 4 of ``text``'s words (letters only), '' if none."""
    words = re.findall(r"[A-Za-z']+", text)[:4]
    return '"' + " ".join(words) + '"' if words else ""


def retained_results(mqtt: dict[str, Any], sids: set[str], wait_s: float = 5.0) -> dict[str, str]:
    """The ``type`` of each session's retained ``transcription/<sid>/result``
    message, read as the service user (``mqtt``: host, port, username, password)."""
    import paho.mqtt.client as paho

    from voxwire_client.messages import parse_message

    found: dict[str, str] = {}
    subscribed = threading.Event()

    def on_message(_c: Any, _u: Any, message: Any) -> None:
        sid = message.topic.split("/")[1]
        if sid in sids and message.retain:
            found[sid] = parse_message(message.payload).type

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.username_pw_set(mqtt["username"], mqtt["password"])
    client.on_message = on_message
    client.on_subscribe = lambda *_: subscribed.set()
    client.connect(mqtt["host"], mqtt["port"])
    client.loop_start()
    try:
        client.subscribe("transcription/+/result", qos=1)
        subscribed.wait(10)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(found) < len(sids):
            time.sleep(0.2)
    finally:
        client.loop_stop()
        client.disconnect()
    return found
