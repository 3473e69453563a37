-- Deleting a session: a tombstone first (`deleted_at`, and why), then everything the session
-- holds is removed, then the deletion is finished (`purged_at`). A tombstoned session is read
-- by no one; an unfinished deletion is finished by the next attempt or by the sweeper.
ALTER TABLE sessions ADD COLUMN deleted_at TIMESTAMPTZ;
ALTER TABLE sessions ADD COLUMN deleted_reason TEXT;
ALTER TABLE sessions ADD COLUMN purged_at TIMESTAMPTZ;
CREATE INDEX sessions_live_created ON sessions (created_at) WHERE deleted_at IS NULL;
CREATE INDEX sessions_deleting ON sessions (deleted_at)
    WHERE deleted_at IS NOT NULL AND purged_at IS NULL;
