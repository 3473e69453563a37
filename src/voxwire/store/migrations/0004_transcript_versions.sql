-- Transcript versions: a session's audio can be transcribed again (a re-transcription), each
-- time as the next version. `version` is the latest asked for; every version's transcript stays
-- in the message log (its `transcript` message), and `segments`/`transcripts` hold the current.
ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1);
-- The redaction the session got, so that its re-transcriptions get it too (NULL: unknown).
ALTER TABLE sessions ADD COLUMN redact TEXT;
CREATE INDEX messages_transcripts ON messages (sid, seq) WHERE type = 'transcript';
