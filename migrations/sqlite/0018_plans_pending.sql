-- Pending plans: an agent's count toward `limits.max_pending_per_agent`
-- with its actions and grant requests (found by agent), and a plan still
-- pending when its session ends expires with it (status `expired`, which
-- the status check must allow: SQLite changes a check by rebuilding).
CREATE TABLE plans_new (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    session     TEXT NOT NULL,
    reason      TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    steps       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    decided_at  INTEGER,
    decided_by  TEXT
);
INSERT INTO plans_new (id, agent, session, reason, status, steps, created_at, decided_at, decided_by)
    SELECT id, agent, session, reason, status, steps, created_at, decided_at, decided_by FROM plans;
DROP TABLE plans;
ALTER TABLE plans_new RENAME TO plans;
CREATE INDEX plans_pending ON plans (created_at) WHERE status = 'pending';
CREATE INDEX plans_pending_agent ON plans (agent) WHERE status = 'pending';
