-- A session's taint is recorded in the transaction that lets its tainting
-- action run (or, for an action allowed at once, before it is stored), so
-- a decision reads the session's row alone. Sessions opened before this
-- migration (`taint_complete` 0) may have let one run whose record a crash
-- lost: their decisions still read their actions (docs/sessions.md).
ALTER TABLE sessions ADD COLUMN taint_complete INTEGER NOT NULL DEFAULT 0;

-- What ending or reopening a session voids, found by session.
CREATE INDEX grants_session ON grants (session) WHERE session IS NOT NULL AND revoked_at IS NULL;
CREATE INDEX plans_session ON plans (session) WHERE status = 'pending';
