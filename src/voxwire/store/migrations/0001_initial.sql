-- voxwire PostgreSQL schema, version 1 (applied by voxwire.store.postgres in one transaction).
-- The tables mirror the SQLite store of embedded mode; a published transcript is one row with
-- its segments as a JSONB array and a generated tsvector for full-text search.

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX tenants_name ON tenants (name, created_at);

-- Only the SHA-256 digest of a key is stored (voxwire.auth); the id part locates it.
CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants (id),
    digest     TEXT NOT NULL,
    label      TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE sessions (
    sid           TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants (id),
    status        TEXT NOT NULL
                  CHECK (status IN ('queued', 'transcribing', 'completed', 'failed')),
    created_at    TIMESTAMPTZ NOT NULL,
    filename      TEXT,
    duration_ms   BIGINT NOT NULL DEFAULT 0,
    percent       DOUBLE PRECISION NOT NULL DEFAULT 0,
    last_seq      BIGINT NOT NULL DEFAULT 0,
    prompts       JSONB NOT NULL DEFAULT '[]',
    language      TEXT,
    error_code    TEXT,
    error_message TEXT
);
CREATE INDEX sessions_tenant ON sessions (tenant_id, created_at DESC);

-- Every message a session published, by seq; (sid, seq) makes recording idempotent.
-- No foreign key to sessions: results may be relayed before (or without) the session row,
-- as in the SQLite store.
CREATE TABLE messages (
    sid     TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    type    TEXT NOT NULL,
    payload JSONB NOT NULL,
    PRIMARY KEY (sid, seq)
);

-- Committed (final) segments as they arrive, one row each: a write costs the same for the
-- first segment of a session and for the three-thousandth.
CREATE TABLE segments (
    sid     TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    payload JSONB NOT NULL,
    PRIMARY KEY (sid, idx)
);

-- The published transcript (the session's `transcript` message): its segments as one JSONB
-- array, its text, and a generated tsvector for full-text search without OpenSearch.
CREATE TABLE transcripts (
    sid      TEXT PRIMARY KEY,
    segments JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(segments) = 'array'),
    text     TEXT NOT NULL DEFAULT '',
    tsv      TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX transcripts_tsv ON transcripts USING GIN (tsv);

CREATE TABLE matches (
    sid     TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    payload JSONB NOT NULL,
    PRIMARY KEY (sid, seq)
);
