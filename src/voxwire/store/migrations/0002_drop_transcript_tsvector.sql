-- Full-text search is SQLite FTS5 or OpenSearch: the generated tsvector of every transcript
-- and its GIN index, maintained on every write, are no longer read.
DROP INDEX IF EXISTS transcripts_tsv;
ALTER TABLE transcripts DROP COLUMN IF EXISTS tsv;
