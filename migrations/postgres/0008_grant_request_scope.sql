-- A grant request may ask for a grant scoped to one of the agent's sessions
-- and to a number of uses (issue 33, docs/sessions.md); approving it makes
-- the grant so scoped.
ALTER TABLE grant_requests ADD COLUMN session TEXT;
ALTER TABLE grant_requests ADD COLUMN uses BIGINT;
