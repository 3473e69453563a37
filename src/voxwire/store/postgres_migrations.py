"""Schema migrations of the PostgreSQL store.

The schema comes from numbered files in ``voxwire/store/migrations/``
(``0001_initial.sql``, ...). Each is applied in its own transaction and recorded
in ``schema_migrations`` with a checksum; a session-level advisory lock lets any
number of processes start at once and exactly one of them apply what is missing.
An applied migration is never edited: a change is a new file.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from importlib import resources

from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow

from voxwire.core.errors import StoreError

log = logging.getLogger(__name__)

_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

Conn = AsyncConnection[DictRow]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations() -> list[Migration]:
    """The migration files shipped in ``voxwire/store/migrations``, by version."""
    found: list[Migration] = []
    for entry in (resources.files("voxwire.store") / "migrations").iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise StoreError(f"migration versions must run 1..n without gaps: {found!r}")
    return found


def _lock_key(schema: str | None) -> int:
    """A signed 64-bit advisory lock key for migrating ``schema``."""
    digest = hashlib.sha256(f"voxwire.migrations:{schema or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def migrate(conn: Conn, schema: str | None) -> list[int]:
    """Apply the missing migrations under an advisory lock; the versions applied."""
    key = _lock_key(schema)
    await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        if schema:
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version, checksum FROM schema_migrations")
        applied = {int(r["version"]): str(r["checksum"]) for r in await cur.fetchall()}
        done: list[int] = []
        known = migrations()
        for migration in known:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    raise StoreError(
                        f"migration {migration.version:04d}_{migration.name} was changed "
                        "after it was applied",
                        hint="add a new migration file instead of editing an applied one",
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            log.info("applied migration %04d_%s", migration.version, migration.name)
            done.append(migration.version)
        newer = sorted(set(applied) - {m.version for m in known})
        if newer:
            log.warning("the database has migrations this voxwire does not know: %s", newer)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
