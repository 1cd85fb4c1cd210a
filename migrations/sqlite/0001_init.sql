-- actiongate's first schema. Times are integer milliseconds since the Unix
-- epoch (UTC) so that they sort and compare as numbers.

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    agent       TEXT,
    hash        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT,
    -- JSON: a preset name (string) or {allow, ask, deny}; NULL = configured default
    profile     TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE actions (
    id               TEXT PRIMARY KEY,          -- UUIDv7, time-ordered
    agent            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    detail           TEXT NOT NULL,
    action_string    TEXT NOT NULL,
    reason           TEXT,
    status           TEXT NOT NULL CHECK (status IN
                       ('pending', 'approved', 'running', 'completed', 'failed',
                        'denied', 'expired', 'cancelled')),
    decision_result  TEXT NOT NULL CHECK (decision_result IN ('allow', 'ask', 'deny')),
    decision_reason  TEXT NOT NULL,
    decision_rule    TEXT,                       -- JSON
    created_at       INTEGER NOT NULL,
    decided_at       INTEGER,
    decided_by       TEXT,
    deadline         INTEGER,
    outcome          TEXT,                       -- JSON
    decision_note    TEXT,
    settled_at       INTEGER,
    idempotency_key  TEXT,
    request_hash     TEXT
);

CREATE UNIQUE INDEX actions_idempotency ON actions (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX actions_agent ON actions (agent, id);
CREATE INDEX actions_status ON actions (status, id);
CREATE INDEX actions_pending_deadline ON actions (deadline) WHERE status = 'pending';

CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    type       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    agent      TEXT,
    action_id  TEXT,
    grant_id   TEXT,
    data       TEXT NOT NULL                     -- JSON
);

CREATE INDEX events_action ON events (action_id, seq) WHERE action_id IS NOT NULL;
CREATE INDEX events_agent ON events (agent, seq);
