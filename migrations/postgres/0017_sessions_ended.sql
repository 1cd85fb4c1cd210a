-- Retention (`records.retention`) deletes sessions that ended before its
-- cutoff; agents choose session ids, so they are found through this index
-- of ended ones rather than by scanning every session.
CREATE INDEX sessions_ended ON sessions (ended_at) WHERE ended_at IS NOT NULL;
