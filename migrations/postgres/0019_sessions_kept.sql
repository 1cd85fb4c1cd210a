-- Retention (`records.retention`) keeps an ended session while a session
-- names it as its taint carrier (a taint recorded later must reach it)
-- and while a grant request for it is pending (approving it must still
-- find the session ended); found through these.
CREATE INDEX sessions_carrier ON sessions (carrier) WHERE carrier IS NOT NULL;
CREATE INDEX grant_requests_session ON grant_requests (session) WHERE status = 'pending';
