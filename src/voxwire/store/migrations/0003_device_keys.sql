-- Device keys: a key's role ('tenant' acts for its tenant, 'device' reaches only the
-- sessions it opened), and the key that opened each session. Existing keys stay
-- tenant keys; existing sessions have no recorded key.
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'tenant'
    CHECK (role IN ('tenant', 'device'));
ALTER TABLE sessions ADD COLUMN key_id TEXT;
