"""Transcript search on SQLite FTS5, for embedded mode.

The index lives in a file of its own (``search.sqlite3`` beside the store), so it
can be dropped and rebuilt by ``voxwire search reindex`` without touching the
transcripts::

    sessions      tenant_id, sid, created_at, language
    segments      tenant_id, sid, idx, segment_id, start_ms, end_ms, text, norm, speaker
    segments_fts  FTS5 over segments.norm (external content, kept in step by
                  triggers), tokenizer ``porter unicode61 remove_diacritics 2``
    segments_vocab  fts5vocab of its terms, for fuzzy searches
    windows       tenant_id, sid, idx, start_ms, end_ms, segments (JSON), norm,
                  speakers (the labels of its segments, space-separated)
    windows_fts   FTS5 over windows.norm, as segments_fts

``norm`` is the segment's words as :func:`voxwire.text.normalization.normalize` writes
them, exactly as OpenSearch indexes ``segments.norm``. A query reaches FTS5
only as quoted strings built from normalised words (FTS5's own syntax never
comes from the user). A fuzzy word becomes ``("word" OR "worde" OR ...)``:
the index's terms within the word's edit distance (:func:`fuzzy_distance`),
found with rapidfuzz among the index's stems. Ranking is FTS5's ``bm25()``.
A ``speaker`` filter keeps the segments of that speaker, and the windows
that hold one (:func:`voxwire.search.spans.window_hits` keeps only its
segments). A file made before speakers were indexed gets the columns when
opened (:meth:`SqliteSearchIndex.ensure_index`); what it held has no speaker
until ``voxwire search reindex``.

One connection, guarded by a lock; every call runs in a worker thread so a
long search does not hold up the event loop. A rebuild (:meth:`rebuild`) fills
a new file and moves it over this one; every call first checks that the file
is still the one it opened, so a running platform follows a rebuild made by
``voxwire search reindex`` in another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from voxwire.search import SearchIndexError
from voxwire.search.query import (
    ParsedQuery,
    SearchHit,
    SearchPage,
    SearchQuery,
    fuzzy_distance,
    parse_query,
    stem,
)
from voxwire.search.spans import page_of, spans_possible, speakers_of, window_hits
from voxwire.text.normalization import normalize
from voxwire.wire.windows import TextWindow
from voxwire_client.messages import SegmentData

_T = TypeVar("_T")


def _fts_over(table: str) -> str:
    """An FTS5 index over ``table.norm`` (external content), kept in step by triggers."""
    return f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {table}_fts USING fts5(
    norm, content='{table}', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS {table}_ai AFTER INSERT ON {table} BEGIN
    INSERT INTO {table}_fts(rowid, norm) VALUES (new.id, new.norm);
END;
CREATE TRIGGER IF NOT EXISTS {table}_ad AFTER DELETE ON {table} BEGIN
    INSERT INTO {table}_fts({table}_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS {table}_au AFTER UPDATE ON {table} BEGIN
    INSERT INTO {table}_fts({table}_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO {table}_fts(rowid, norm) VALUES (new.id, new.norm);
END;
"""  # noqa: S608 (only this module's table names are interpolated)


SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS sessions (
    tenant_id TEXT NOT NULL, sid TEXT NOT NULL, created_at TEXT NOT NULL, language TEXT,
    PRIMARY KEY (tenant_id, sid));
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, sid TEXT NOT NULL, idx INTEGER NOT NULL,
    segment_id TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
    text TEXT NOT NULL, norm TEXT NOT NULL, speaker TEXT,
    UNIQUE (tenant_id, sid, idx));
CREATE TABLE IF NOT EXISTS windows (
    id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, sid TEXT NOT NULL, idx INTEGER NOT NULL,
    start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, segments TEXT NOT NULL,
    norm TEXT NOT NULL, speakers TEXT NOT NULL DEFAULT '',
    UNIQUE (tenant_id, sid, idx));
"""
    + _fts_over("segments")
    + _fts_over("windows")
    + """
CREATE VIRTUAL TABLE IF NOT EXISTS segments_vocab USING fts5vocab(segments_fts, row);
"""
)

_UPSERT_SEGMENT = """
INSERT INTO segments (tenant_id, sid, idx, segment_id, start_ms, end_ms, text, norm, speaker)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, sid, idx) DO UPDATE SET
    segment_id = excluded.segment_id, start_ms = excluded.start_ms,
    end_ms = excluded.end_ms, text = excluded.text, norm = excluded.norm,
    speaker = excluded.speaker
WHERE (segment_id, start_ms, end_ms, text, speaker)
    IS NOT (excluded.segment_id, excluded.start_ms, excluded.end_ms, excluded.text,
            excluded.speaker)
"""

_UPSERT_WINDOW = """
INSERT INTO windows (tenant_id, sid, idx, start_ms, end_ms, segments, norm, speakers)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, sid, idx) DO UPDATE SET
    start_ms = excluded.start_ms, end_ms = excluded.end_ms,
    segments = excluded.segments, norm = excluded.norm, speakers = excluded.speakers
WHERE segments IS NOT excluded.segments
"""

_SEGMENTS = TypeAdapter(tuple[SegmentData, ...])

_UPSERT_SESSION = """
INSERT INTO sessions (tenant_id, sid, created_at, language) VALUES (?, ?, ?, ?)
ON CONFLICT (tenant_id, sid) DO UPDATE SET language = coalesce(excluded.language, language)
"""

_FUZZY_CHOICES = 20  # index terms a fuzzy word may stand for

_ADDED_COLUMNS = (
    ("segments", "speaker", "TEXT"),
    ("windows", "speakers", "TEXT NOT NULL DEFAULT ''"),
)
"""Columns newer than the first files: added to a file that lacks them."""


def _connect(path: Path | str) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA secure_delete=ON")  # a deleted session's text is overwritten
        return db
    except sqlite3.Error as exc:
        raise SearchIndexError(f"cannot open the search index {path}: {exc}") from exc


def _inode(path: Path | str) -> int | None:
    """The file's identity, to notice that a rebuild replaced it."""
    try:
        return None if str(path) == ":memory:" else os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _utc(moment: datetime) -> str:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _quoted(words: Sequence[str]) -> str:
    return '"' + " ".join(words).replace('"', '""') + '"'


class SqliteSearchIndex:
    """A :class:`~voxwire.search.SearchIndex` on SQLite FTS5."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = _connect(path)
        self._inode = _inode(path)
        self._lock = threading.Lock()
        self._vocab: list[str] | None = None  # index terms, loaded by the first fuzzy search

    async def _call(self, fn: Callable[[], _T]) -> _T:
        def locked() -> _T:
            with self._lock:
                try:
                    if _inode(self.path) != self._inode:  # rebuilt by another process
                        self._db.close()
                        self._db, self._inode = _connect(self.path), _inode(self.path)
                        self._vocab = None
                    return fn()
                except sqlite3.Error as exc:
                    raise SearchIndexError(f"search index {self.path}: {exc}") from exc

        return await asyncio.to_thread(locked)

    async def ping(self) -> None:
        """Whether the index file answers a query (readiness)."""
        await self._call(lambda: self._db.execute("SELECT 1").fetchone())

    async def ensure_index(self) -> bool:
        def create() -> bool:
            found = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'segments_fts'"
            ).fetchone()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
            for table, column, kind in _ADDED_COLUMNS:
                columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in columns:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            return found is None

        return await self._call(create)

    @contextlib.asynccontextmanager
    async def rebuild(self) -> AsyncIterator[SqliteSearchIndex]:
        """An empty index in a file beside this one to fill; once the block ends
        without an error it replaces this index (searches see the old one until
        then), else it is deleted."""
        if str(self.path) == ":memory:":
            raise SearchIndexError("an in-memory search index cannot be rebuilt")
        path = Path(self.path)
        fresh_path = path.with_name(path.name + ".rebuild")
        fresh_path.unlink(missing_ok=True)
        fresh = SqliteSearchIndex(fresh_path)
        await fresh.ensure_index()
        try:
            yield fresh
        except BaseException:
            await fresh.close()
            fresh_path.unlink(missing_ok=True)
            raise

        def swap() -> None:
            fresh._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            fresh._db.close()
            self._db.close()
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            os.replace(fresh_path, path)
            self._db, self._inode = _connect(path), _inode(path)
            self._vocab = None

        await self._call(swap)

    async def drop_index(self) -> None:
        """Delete everything indexed (``ensure_index`` starts it again)."""

        def drop() -> None:
            for name in (
                "segments_vocab",
                "segments_fts",
                "segments",
                "windows_fts",
                "windows",
                "sessions",
            ):
                self._db.execute(f"DROP TABLE IF EXISTS {name}")
            self._vocab = None

        await self._call(drop)

    async def refresh(self) -> None:
        """Nothing to do: what is indexed is searchable at once."""

    async def index_segments(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        if not segments:
            return
        rows = [
            (
                tenant_id,
                sid,
                s.index,
                s.id,
                s.start_ms,
                s.end_ms,
                s.text,
                " ".join(t.text for t in normalize(s.text)),
                s.speaker,
            )
            for s in segments
        ]
        session = (tenant_id, sid, _utc(created_at), language or segments[-1].language)

        def write() -> None:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(_UPSERT_SESSION, session)
                self._db.executemany(_UPSERT_SEGMENT, rows)
            self._vocab = None

        await self._call(write)

    async def index_windows(
        self,
        tenant_id: str,
        sid: str,
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        if not windows:
            return
        rows = [
            (
                tenant_id,
                sid,
                w.index,
                w.start_ms,
                w.end_ms,
                _SEGMENTS.dump_json(w.segments).decode(),
                " ".join(t.text for t in normalize(w.text)),
                " ".join(speakers_of(w.segments)),
            )
            for w in windows
        ]
        session = (tenant_id, sid, _utc(created_at), language)

        def write() -> None:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(_UPSERT_SESSION, session)
                self._db.executemany(_UPSERT_WINDOW, rows)

        await self._call(write)

    async def replace_session(
        self,
        tenant_id: str,
        sid: str,
        segments: Sequence[SegmentData],
        windows: Sequence[TextWindow],
        created_at: datetime,
        language: str | None = None,
    ) -> None:
        """Delete what the session had, then index these (a search in between
        finds nothing of the session)."""

        def delete() -> None:
            with self._db:
                self._db.execute("BEGIN")
                for table in ("segments", "windows"):
                    self._db.execute(
                        f"DELETE FROM {table} WHERE tenant_id = ? AND sid = ?",  # noqa: S608
                        (tenant_id, sid),
                    )
            self._vocab = None

        await self._call(delete)
        await self.index_segments(tenant_id, sid, segments, created_at, language)
        await self.index_windows(tenant_id, sid, windows, created_at, language)

    async def delete_session(self, tenant_id: str, sid: str) -> None:
        """Remove the session's rows (the triggers take them out of the FTS tables),
        and leave no copy of its text in the file: deleted pages are overwritten
        (``secure_delete``), the FTS indexes merged, the write-ahead log emptied."""

        def delete() -> None:
            made = "SELECT 1 FROM sqlite_master WHERE name = 'segments_fts'"
            if self._db.execute(made).fetchone() is None:
                return  # no index yet: nothing indexed
            with self._db:
                self._db.execute("BEGIN")
                for table in ("segments", "windows", "sessions"):
                    self._db.execute(
                        f"DELETE FROM {table} WHERE tenant_id = ? AND sid = ?",  # noqa: S608
                        (tenant_id, sid),
                    )
            self._db.execute("INSERT INTO segments_fts(segments_fts) VALUES ('optimize')")
            self._db.execute("INSERT INTO windows_fts(windows_fts) VALUES ('optimize')")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log's copies too
            self._vocab = None

        await self._call(delete)

    async def search(self, tenant_id: str, query: SearchQuery) -> SearchPage:
        parsed = parse_query(query.q)
        match = self._match_expression(parsed, query.fuzzy)
        limit = query.offset + query.size + 1  # one more: is there a next page?

        def run() -> tuple[list[SearchHit], list[SearchHit]]:
            sql, args = self._select("segments", tenant_id, query, match, limit)
            segment_hits = [
                SearchHit(
                    sid=row[0],
                    segment_id=row[1],
                    index=row[2],
                    start_ms=row[3],
                    end_ms=row[4],
                    text=row[5],
                    highlight="",
                    score=-float(row[7]),
                    speaker=row[6],
                )
                for row in self._db.execute(sql, args)
            ]
            spanning: list[SearchHit] = []
            if spans_possible(parsed):
                loose = self._match_expression(parsed.windows_for(query.speaker), query.fuzzy)
                sql, args = self._select("windows", tenant_id, query, loose, limit)
                for sid, segments, rank in self._db.execute(sql, args):
                    found = _SEGMENTS.validate_json(segments)
                    spanning += window_hits(sid, found, -float(rank), parsed, query)
            return segment_hits, spanning

        segment_hits, spanning = await self._call(run)
        return page_of(segment_hits, spanning, query, parsed)

    def _select(
        self, table: str, tenant_id: str, query: SearchQuery, match: str, limit: int
    ) -> tuple[str, list[object]]:
        """The best ``limit`` rows of ``table`` (segments or windows) for the query."""
        where = [f"{table}_fts MATCH ?", "s.tenant_id = ?"]
        args: list[object] = [match, tenant_id]
        if query.sids is not None:
            where.append(f"s.sid IN ({', '.join('?' * len(query.sids))})")
            args.extend(query.sids)
        if query.start_ms is not None:
            where.append("s.end_ms > ?")
            args.append(query.start_ms)
        if query.end_ms is not None:
            where.append("s.start_ms < ?")
            args.append(query.end_ms)
        if query.created_from is not None:
            where.append("x.created_at >= ?")
            args.append(_utc(query.created_from))
        if query.created_to is not None:
            where.append("x.created_at < ?")
            args.append(_utc(query.created_to))
        if query.language is not None:
            where.append("x.language = ?")
            args.append(query.language)
        if query.speaker is not None and table == "segments":
            where.append("s.speaker = ?")
            args.append(query.speaker)
        elif query.speaker is not None:
            where.append("(' ' || s.speakers || ' ') LIKE ?")
            args.append(f"% {query.speaker} %")  # a label has no LIKE wildcards
        columns = (
            "s.segment_id, s.idx, s.start_ms, s.end_ms, s.text, s.speaker"
            if table == "segments"
            else "s.segments"
        )
        sql = f"""
            SELECT s.sid, {columns}, bm25({table}_fts) AS rank
            FROM {table}_fts
            JOIN {table} s ON s.id = {table}_fts.rowid
            JOIN sessions x ON x.tenant_id = s.tenant_id AND x.sid = s.sid
            WHERE {" AND ".join(where)}
            ORDER BY rank, s.sid, s.idx
            LIMIT ?
        """  # noqa: S608 (only names of this module and placeholders are interpolated)
        args.append(limit)
        return sql, args

    def _match_expression(self, parsed: ParsedQuery, fuzzy: bool) -> str:
        parts = []
        for word in parsed.words:
            alternatives = [word, *self._near(word)] if fuzzy else [word]
            quoted = " OR ".join(_quoted([w]) for w in dict.fromkeys(alternatives))
            parts.append(f"({quoted})")
        parts += [_quoted(phrase) for phrase in parsed.phrases]
        return " AND ".join(parts)

    def _near(self, word: str) -> list[str]:
        """Index terms (Porter stems) within the fuzzy distance of ``word``'s stem."""
        limit = fuzzy_distance(word)
        if limit == 0:
            return []
        if self._vocab is None:
            self._vocab = [row[0] for row in self._db.execute("SELECT term FROM segments_vocab")]
        found = process.extract(
            stem(word),
            self._vocab,
            scorer=Levenshtein.distance,
            score_cutoff=limit,
            limit=_FUZZY_CHOICES,
        )
        return [term for term, _distance, _i in found]

    async def close(self) -> None:
        await self._call(self._db.close)
