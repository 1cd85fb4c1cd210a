-- Rebuilds `actions` and `events` so that inserting a row costs less, the
-- writer's hottest statement (every new action is one row of each):
--
-- * The CHECKs on `actions.status` and `actions.decision_result` listed their
--   values with IN (...). SQLite evaluates such a list by building a
--   temporary b-tree of its values, afresh for every row inserted or
--   updated. The same values as a chain of comparisons cost a few compares.
-- * `events.id` was UNIQUE: an index nothing reads (events are found by
--   `seq`), updated on every insert. Ids are UUIDv7s made by the store.
--
-- Same columns, order, indexes and index names as before. Existing rows are
-- copied once, so on a large database this migration takes a while.

CREATE TABLE actions_new (
    id               TEXT PRIMARY KEY,          -- UUIDv7, time-ordered
    agent            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    detail           TEXT NOT NULL,
    action_string    TEXT NOT NULL,
    reason           TEXT,
    status           TEXT NOT NULL CHECK (
                       status = 'pending' OR status = 'approved' OR status = 'running'
                       OR status = 'completed' OR status = 'failed' OR status = 'denied'
                       OR status = 'expired' OR status = 'cancelled'),
    decision_result  TEXT NOT NULL CHECK (
                       decision_result = 'allow' OR decision_result = 'ask'
                       OR decision_result = 'deny'),
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
    request_hash     TEXT,
    handler          TEXT,
    action_name      TEXT,
    -- Params as sent (for the executor) and as shown (sensitive values masked).
    params           TEXT,
    params_view      TEXT,
    permission       TEXT,
    scope            TEXT,
    display          TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    -- JSON array of {n, at, status_code?, error?, duration_ms}
    attempt_log      TEXT,
    -- A running action's lease: past it, the attempt is presumed lost.
    lease_until      INTEGER,
    -- When an approved handler action is next due for dispatch.
    next_attempt_at  INTEGER
);

INSERT INTO actions_new SELECT
    id, agent, tool, detail, action_string, reason, status, decision_result,
    decision_reason, decision_rule, created_at, decided_at, decided_by,
    deadline, outcome, decision_note, settled_at, idempotency_key,
    request_hash, handler, action_name, params, params_view, permission,
    scope, display, attempts, attempt_log, lease_until, next_attempt_at
FROM actions;

DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;

CREATE UNIQUE INDEX actions_idempotency ON actions (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX actions_agent ON actions (agent, id);
CREATE INDEX actions_status ON actions (status, id);
CREATE INDEX actions_pending_deadline ON actions (deadline) WHERE status = 'pending';
CREATE INDEX actions_handler ON actions (handler, id) WHERE handler IS NOT NULL;
CREATE INDEX actions_dispatch_due ON actions (next_attempt_at)
    WHERE status = 'approved' AND handler IS NOT NULL;
CREATE INDEX actions_running_lease ON actions (lease_until)
    WHERE status = 'running';

CREATE TABLE events_new (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    agent      TEXT,
    action_id  TEXT,
    grant_id   TEXT,
    data       TEXT NOT NULL                     -- JSON
);

INSERT INTO events_new SELECT seq, id, type, at, agent, action_id, grant_id, data FROM events;

-- `seq` never goes back, not even past events that were deleted: the new
-- table's counter starts where the old one's stood.
DELETE FROM sqlite_sequence WHERE name = 'events_new';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events';

DROP TABLE events;
ALTER TABLE events_new RENAME TO events;

CREATE INDEX events_action ON events (action_id, seq) WHERE action_id IS NOT NULL;
CREATE INDEX events_agent ON events (agent, seq);
