"""A store made by an older voxwire opens with the device-key and transcript-version
columns added and nothing lost: its keys stay tenant keys, its sessions have no
recorded key, and their transcripts are version 1."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store import drop_schema, fresh_schema, pg_query, postgres_dsn, require
from voxwire.access.keys import KeyGrant, generate_key
from voxwire.access.owners import SessionOwner
from voxwire.store import SqliteStore
from voxwire.store.postgres import PostgresStore
from voxwire.store.postgres_migrations import migrations

OLD_SQLITE = """
CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
    digest TEXT NOT NULL, label TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);
CREATE TABLE sessions (
    sid TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
    status TEXT NOT NULL, created_at TEXT NOT NULL, filename TEXT,
    duration_ms INTEGER NOT NULL DEFAULT 0, percent REAL NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0, prompts TEXT NOT NULL DEFAULT '[]',
    language TEXT, text TEXT NOT NULL DEFAULT '', error_code TEXT, error_message TEXT);
"""
WHEN = "2026-01-01T00:00:00+00:00"


async def test_an_older_sqlite_store_keeps_its_keys_and_sessions(tmp_path: Path) -> None:
    path, key = tmp_path / "old.sqlite3", generate_key()
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SQLITE)
        db.execute("INSERT INTO tenants VALUES ('t_old', 'default', ?)", (WHEN,))
        db.execute(
            "INSERT INTO api_keys VALUES (?, 't_old', ?, 'cli', ?, NULL)",
            (key.key_id, key.digest, WHEN),
        )
        db.execute(
            "INSERT INTO sessions (sid, tenant_id, status, created_at, text) "
            "VALUES ('s_old', 't_old', 'completed', ?, 'hello')",
            (WHEN,),
        )
    store = SqliteStore(path)
    try:
        assert await store.key_grant(key.plaintext) == KeyGrant(key.key_id, "t_old", "tenant")
        assert [k.role for k in await store.list_api_keys()] == ["tenant"]
        session = await store.get_session("s_old")
        assert session is not None and session.text == "hello" and session.key_id is None
        assert session.version == 1  # transcript versions came later: its transcript is the first
        reopened = await store.reopen_session("s_old")
        assert reopened is not None and reopened.redact is None  # opened before it was recorded
        assert await store.session_owner("s_old") == SessionOwner("t_old")
    finally:
        await store.close()
    SqliteStore(path)  # opening it again changes nothing


async def test_an_older_postgres_schema_is_migrated_without_losing_data() -> None:
    require("postgres")
    schema, key = fresh_schema(), generate_key()
    before = [m for m in migrations() if m.version < 3]  # before device keys and versions
    assert [m.name for m in migrations()[2:4]] == ["device_keys", "transcript_versions"]
    try:
        await pg_query("public", f'CREATE SCHEMA "{schema}"')
        for migration in before:
            await pg_query(schema, migration.sql)
        await pg_query(
            schema,
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " checksum TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        for migration in before:
            await pg_query(
                schema,
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                migration.version,
                migration.name,
                migration.checksum,
            )
        await pg_query(schema, "INSERT INTO tenants VALUES ('t_old', 'default', now())")
        await pg_query(
            schema,
            "INSERT INTO api_keys (id, tenant_id, digest, label, created_at) "
            "VALUES (%s, 't_old', %s, 'cli', now())",
            key.key_id,
            key.digest,
        )
        await pg_query(
            schema,
            "INSERT INTO sessions (sid, tenant_id, status, created_at) "
            "VALUES ('s_old', 't_old', 'completed', now())",
        )
        store = await PostgresStore.open(postgres_dsn(), schema=schema, timeout=5)
        try:
            assert await store.key_grant(key.plaintext) == KeyGrant(key.key_id, "t_old")
            assert [k.role for k in await store.list_api_keys()] == ["tenant"]
            assert await store.session_owner("s_old") == SessionOwner("t_old")
            session = await store.get_session("s_old")
            assert session is not None and session.key_id is None and session.version == 1
        finally:
            await store.close()
    finally:
        await drop_schema(schema)
