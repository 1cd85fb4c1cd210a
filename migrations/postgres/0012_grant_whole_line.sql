-- A tool grant whose pattern is for the whole command line, not for each
-- simple command of it: what a plan's shell step grants (that line as
-- approved, never one of its commands alone). 0 for every other grant.
ALTER TABLE grants ADD COLUMN whole_line BIGINT NOT NULL DEFAULT 0;
