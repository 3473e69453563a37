-- Webhooks: each callback of an upload is a delivery, kept until it is acknowledged
-- (`delivered`), runs out of time (`expired`) or is refused (`refused`); until then it is
-- `pending`, due at `next_attempt_at` once its session is finished. A gateway claims it under a
-- lease (`lease`, `leased_until`) and only the lease's holder records the attempt's outcome.
-- `webhook_secrets` holds each API key's signing secret (read back to sign: not hashed).
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    sid             TEXT NOT NULL,
    key_id          TEXT NOT NULL,
    url             TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'expired', 'refused')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    last_error      TEXT,
    delivered_at    TIMESTAMPTZ,
    lease           TEXT,
    leased_until    TIMESTAMPTZ
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_sid ON webhook_deliveries (sid);
CREATE TABLE webhook_secrets (
    key_id     TEXT PRIMARY KEY,
    secret     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
