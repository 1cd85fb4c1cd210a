-- Sessions (issue 33): the task an action belongs to, as the agent runtime
-- names it, and what is scoped to it.
--
-- An action may carry the session it belongs to and the runtime that sent
-- it (both NULL when the agent said nothing).
ALTER TABLE actions ADD COLUMN session TEXT;
ALTER TABLE actions ADD COLUMN runtime TEXT;
CREATE INDEX actions_session ON actions (session, id) WHERE session IS NOT NULL;

-- A grant may be scoped to one session (void once it ends) and to a number
-- of allowed actions: `uses` as granted, `uses_left` taken one at a time in
-- the transaction that stores the action it allows.
ALTER TABLE grants ADD COLUMN session TEXT;
ALTER TABLE grants ADD COLUMN uses INTEGER;
ALTER TABLE grants ADD COLUMN uses_left INTEGER;
CREATE INDEX grants_scoped ON grants (tool, handler)
    WHERE revoked_at IS NULL AND (session IS NOT NULL OR uses_left IS NOT NULL);

-- One row per session: whose it is (an id is one agent's), when it was seen,
-- whether it ended, and which action tainted it (see docs/sessions.md).
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    agent         TEXT NOT NULL,
    runtime       TEXT,
    first_seen    INTEGER NOT NULL,
    last_seen     INTEGER NOT NULL,
    ended_at      INTEGER,
    ended_by      TEXT,
    tainted_by    TEXT,
    tainted_at    INTEGER,
    taint_action  TEXT
);
CREATE INDEX sessions_last_seen ON sessions (last_seen) WHERE ended_at IS NULL;

-- Plans: steps an agent asks approval for at once; approved steps become
-- session grants of one use each (`steps` is a JSON array).
CREATE TABLE plans (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    session     TEXT NOT NULL,
    reason      TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    steps       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    decided_at  INTEGER,
    decided_by  TEXT
);
CREATE INDEX plans_pending ON plans (created_at) WHERE status = 'pending';
