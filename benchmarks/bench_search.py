"""Search and prompt matching at scale: indexing rate, query latency, match cost.

Synthetic transcripts: ``--segments`` segments (default 100 000) in sessions of
50, 8-16 words each, drawn from the ../shared/eval reference words and 5 000
made-up words with a Zipf-like frequency, so that common words are common and
rare ones rare, as in speech. Every backend indexes the same segments and
answers the same queries:

- ``phrase``: a quoted 2-3 word run taken from a random indexed segment;
- ``fuzzy``: one word of a random segment with a letter changed, fuzzy on;
- ``window``: a word of a random segment, limited to the first 60 s of audio;
- ``across``: a quoted phrase from the last words of a segment into the first
  words of the next, found only through the windows of committed text.

Figures: segments, then their windows (:mod:`voxwire.wire.windows`), indexed per
second, query p50/p95 in ms (one query at a time), and, as the baseline measured
in the same run, the same phrase queries
as a SQLite ``LIKE`` scan of the normalised text (what search costs without a
full-text index). Then the cost of prompt matching per committed final: a
session with 100 standing prompts, finals of 8-16 words.

    set -a; eval "$(scripts/services.sh env)"; set +a
    .venv/bin/python benchmarks/bench_search.py [--segments 100000] [--backends sqlite,opensearch]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from voxwire.search import SearchIndex, SearchQuery
from voxwire.search.opensearch import OpenSearchIndex
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.text.matching import Prompt, PromptMatcher
from voxwire.text.normalization import normalize
from voxwire.text.standing_prompts import StandingPrompts
from voxwire.wire.windows import windows_of
from voxwire_client.messages import SegmentData

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval" / "manifest.jsonl"
PER_SESSION = 50
QUERIES = 200
TENANT = "bench"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def vocabulary(rng: random.Random) -> list[str]:
    words = []
    for line in EVAL.read_text().splitlines():
        text = json.loads(line)["text"]
        if text:
            words += [t.text for t in normalize(text)]
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "da", "pi", "gor", "lin", "tas"]
    made_up = {"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(6000)}
    return list(dict.fromkeys(words)) + sorted(made_up)[:5000]


def corpus(count: int, rng: random.Random) -> list[tuple[str, list[SegmentData]]]:
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf-like
    sessions = []
    for s in range(0, count, PER_SESSION):
        sid = f"bench_{s // PER_SESSION:06d}"
        segments, clock = [], 0
        for i in range(min(PER_SESSION, count - s)):
            n = rng.randint(8, 16)
            text = " ".join(rng.choices(words, weights, k=n))
            duration = n * 350
            segments.append(SegmentData(id=f"{sid}-{i}", index=i, start_ms=clock,
                                        end_ms=clock + duration, text=text))  # fmt: skip
            clock += duration + 200
        sessions.append((sid, segments))
    return sessions


def queries(sessions: list[tuple[str, list[SegmentData]]], rng: random.Random) -> dict[str, list]:
    def random_words() -> list[str]:
        _, segments = rng.choice(sessions)
        return rng.choice(segments).text.split()

    def phrase() -> SearchQuery:
        words = random_words()
        n = rng.randint(2, 3)
        i = rng.randrange(len(words) - n)
        return SearchQuery(q='"' + " ".join(words[i : i + n]) + '"')

    def fuzzy() -> SearchQuery:
        word = max(random_words(), key=len)
        i = rng.randrange(len(word))
        return SearchQuery(q=word[:i] + rng.choice("aeiouxz") + word[i + 1 :], fuzzy=True)

    def window() -> SearchQuery:
        return SearchQuery(q=rng.choice(random_words()), start_ms=0, end_ms=60_000)

    def across() -> SearchQuery:
        _, segments = rng.choice(sessions)
        i = rng.randrange(len(segments) - 1)
        words = segments[i].text.split()[-2:] + segments[i + 1].text.split()[:1]
        return SearchQuery(q='"' + " ".join(words) + '"')

    return {kind: [make() for _ in range(QUERIES)] for kind, make in
            (("phrase", phrase), ("fuzzy", fuzzy), ("window", window),
             ("across", across))}  # fmt: skip


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> list[float]:
    samples = []
    for call in calls:
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def bench_backend(
    name: str, index: SearchIndex, sessions: list, asked: dict[str, list]
) -> dict[str, float]:
    await index.ensure_index()
    count = sum(len(segments) for _, segments in sessions)
    started = time.perf_counter()
    for sid, segments in sessions:
        await index.index_segments(TENANT, sid, segments, NOW, "en")
    await index.refresh()
    rate = count / (time.perf_counter() - started)
    windows = [(sid, windows_of(segments, sid)) for sid, segments in sessions]
    started = time.perf_counter()
    for sid, found in windows:
        await index.index_windows(TENANT, sid, found, NOW, "en")
    await index.refresh()
    window_rate = sum(len(w) for _, w in windows) / (time.perf_counter() - started)
    row: dict[str, float] = {"segments_per_s": rate, "windows_per_s": window_rate}
    for kind, batch in asked.items():
        found = 0

        async def one(query: SearchQuery) -> None:
            nonlocal found
            found += bool((await index.search(TENANT, query)).hits)

        for query in batch[:10]:  # warm caches
            await one(query)
        found = 0
        p50, p95 = percentiles(await timed([lambda q=q: one(q) for q in batch]))
        row |= {f"{kind}_p50_ms": p50, f"{kind}_p95_ms": p95, f"{kind}_found": found / len(batch)}
    print(f"  {name}: indexed {count} segments at {rate:,.0f}/s, their windows at "
          f"{window_rate:,.0f}/s", flush=True)  # fmt: skip
    return row


def like_scan(sessions: list, phrases: list[SearchQuery]) -> dict[str, float]:
    """The baseline: the phrase as a substring of every segment's normalised text."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE segments (tenant_id TEXT, sid TEXT, idx INT, norm TEXT)")
    db.executemany(
        "INSERT INTO segments VALUES (?, ?, ?, ?)",
        ((TENANT, sid, s.index, " ".join(t.text for t in normalize(s.text)))
         for sid, segments in sessions for s in segments),
    )  # fmt: skip
    samples = []
    for query in phrases:
        needle = f"%{query.q.strip(chr(34)).lower()}%"
        started = time.perf_counter()
        db.execute(
            "SELECT sid, idx FROM segments WHERE tenant_id = ? AND norm LIKE ? LIMIT 10",
            (TENANT, needle),
        ).fetchall()
        samples.append((time.perf_counter() - started) * 1000)
    p50, p95 = percentiles(samples)
    return {"phrase_p50_ms": p50, "phrase_p95_ms": p95}


def match_cost(rng: random.Random, sessions: list) -> dict[str, float]:
    words = [w for _, segments in sessions[:50] for s in segments for w in s.text.split()]
    prompts = [
        Prompt(id=f"p{i}", text=" ".join(rng.sample(words, rng.randint(1, 3)))) for i in range(100)
    ]
    finals = [s for _, segments in sessions[:20] for s in segments]
    single = PromptMatcher(prompts)  # the baseline: each final on its own
    started = time.perf_counter()
    for s in finals:
        single.match(s.id, s.text, s.start_ms, s.end_ms)
    baseline = (time.perf_counter() - started) * 1000 / len(finals)
    standing = StandingPrompts(prompts)  # with the two finals before it
    started = time.perf_counter()
    hits = sum(len(standing.on_final(s.id, s.text, s.start_ms, s.end_ms)) for s in finals)
    per_final = (time.perf_counter() - started) * 1000 / len(finals)
    return {"prompts": 100, "finals": len(finals), "ms_per_final": per_final, "hits": hits,
            "single_segment_ms_per_final": baseline}  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segments", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,opensearch")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sessions = corpus(args.segments, rng)
    asked = queries(sessions, rng)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            index: SearchIndex
            if backend == "sqlite":
                index = SqliteSearchIndex(Path(tmp) / "search.sqlite3")
            else:
                url = os.environ.get("VOXWIRE_OPENSEARCH_URL", "http://127.0.0.1:19200")
                alias = f"vxbench-{secrets.token_hex(3)}"
                index = OpenSearchIndex.open(url, alias=alias, replicas=0, timeout=60)
            try:
                results[backend] = await bench_backend(backend, index, sessions, asked)
            finally:
                if isinstance(index, OpenSearchIndex):
                    await index.drop_index()
                await index.close()
    results["like-scan"] = like_scan(sessions, asked["phrase"])
    matching = match_cost(rng, sessions)

    print(f"\n{args.segments} segments, {QUERIES} queries of each kind, one at a time\n")
    kinds = ("phrase", "fuzzy", "window", "across")
    print(f"{'backend':<11} {'index/s':>9}  " + "  ".join(f"{k + ' p50/p95':>15}" for k in kinds)
          + "  found (" + "/".join(kinds) + ")")  # fmt: skip
    for name, row in results.items():

        def pair(kind: str, r: dict[str, float] = row) -> str:
            if f"{kind}_p50_ms" not in r:
                return f"{'-':>15}"
            return f"{r[f'{kind}_p50_ms']:>6.1f} / {r[f'{kind}_p95_ms']:>6.1f}"

        rate = f"{row['segments_per_s']:>9,.0f}" if "segments_per_s" in row else f"{'-':>9}"
        found = "/".join(f"{row.get(f'{k}_found', 0):.2f}" for k in kinds)
        print(f"{name:<11} {rate}  " + "  ".join(pair(k) for k in kinds)
              + f"  {found if 'segments_per_s' in row else ''}")  # fmt: skip
    base = results["like-scan"]["phrase_p50_ms"]
    for name, row in results.items():
        if name != "like-scan":
            print(f"phrase p50 vs LIKE scan, {name}: {base / row['phrase_p50_ms']:.1f}x faster")
    print(f"\nprompt matching: {matching['prompts']} standing prompts, "
          f"{matching['ms_per_final']:.2f} ms per final across finals ({matching['finals']} "
          f"finals, {matching['hits']} hits); each final alone (baseline): "
          f"{matching['single_segment_ms_per_final']:.2f} ms, ratio "
          f"{matching['ms_per_final'] / matching['single_segment_ms_per_final']:.1f}x")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"search": results, "matching": matching}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
