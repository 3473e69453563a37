-- Quotas and usage metering (voxwire.access.quotas, voxwire.store.usage).
-- A session records its kind (file or live; older rows: by their file name). Quotas are limits
-- per tenant (key_id '') or per key; no row: unlimited. Usage is one row per session version,
-- written with its transcript and only if absent, so a transcript stored twice counts once;
-- deleting a session keeps its usage rows (they hold no content).
ALTER TABLE sessions ADD COLUMN kind TEXT CHECK (kind IN ('file', 'live'));
CREATE INDEX sessions_under_way ON sessions (tenant_id)
    WHERE status IN ('queued', 'transcribing');

CREATE TABLE quotas (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id),
    key_id     TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL,
    value      BIGINT NOT NULL CHECK (value >= 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key_id, name)
);

CREATE TABLE usage (
    sid         TEXT NOT NULL,
    version     INTEGER NOT NULL,
    tenant_id   TEXT NOT NULL,
    key_id      TEXT,
    model       TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('file', 'live', 'retranscription')),
    day         DATE NOT NULL,
    audio_ms    BIGINT NOT NULL CHECK (audio_ms >= 0),
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (sid, version)
);
CREATE INDEX usage_tenant_day ON usage (tenant_id, day);
