-- actiongate's schema on Postgres: the same tables and columns as the
-- SQLite schema after its migrations, so both backends read and write the
-- same rows. Times are milliseconds since the Unix epoch (UTC) in BIGINT;
-- JSON is kept as the exact text written (it is hashed into the audit
-- chain), so TEXT, not JSONB. Every integer is BIGINT (the store decodes
-- integers as 64-bit on both backends).

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    agent       TEXT,
    hash        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT,
    profile     TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE actions (
    id               TEXT PRIMARY KEY,
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
    decision_rule    TEXT,
    created_at       BIGINT NOT NULL,
    decided_at       BIGINT,
    decided_by       TEXT,
    deadline         BIGINT,
    outcome          TEXT,
    decision_note    TEXT,
    settled_at       BIGINT,
    idempotency_key  TEXT,
    request_hash     TEXT,
    handler          TEXT,
    action_name      TEXT,
    params           TEXT,
    params_view      TEXT,
    permission       TEXT,
    scope            TEXT,
    display          TEXT,
    attempts         BIGINT NOT NULL DEFAULT 0,
    attempt_log      TEXT,
    lease_until      BIGINT,
    -- `attempts` is also the lease's fencing token: every claim bumps it,
    -- and an attempt's outcome is written only while it is still the
    -- current one, so a node whose lease lapsed (and was taken over)
    -- writes nothing.
    next_attempt_at  BIGINT
);

CREATE UNIQUE INDEX actions_idempotency ON actions (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX actions_agent ON actions (agent, id);
CREATE INDEX actions_status ON actions (status, id);
CREATE INDEX actions_pending_deadline ON actions (deadline) WHERE status = 'pending';
CREATE INDEX actions_handler ON actions (handler, id) WHERE handler IS NOT NULL;
CREATE INDEX actions_dispatch_due ON actions (next_attempt_at)
    WHERE status = 'approved' AND handler IS NOT NULL;
CREATE INDEX actions_running_lease ON actions (lease_until) WHERE status = 'running';

-- The event log. `seq` is not a sequence: sequences hand out numbers in the
-- order transactions ask, not the order they commit, so a reader could see
-- seq 7 before seq 6 commits and skip it for good. Each transaction takes
-- its seqs from `event_counter` as its last step before committing; the
-- row lock it takes there is held until it commits, so the next writer gets
-- the next numbers only after this one's events are visible: seqs are
-- gapless and in commit order.
CREATE TABLE events (
    seq        BIGINT PRIMARY KEY,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    agent      TEXT,
    action_id  TEXT,
    grant_id   TEXT,
    data       TEXT NOT NULL
);

CREATE INDEX events_action ON events (action_id, seq) WHERE action_id IS NOT NULL;
CREATE INDEX events_agent ON events (agent, seq);

CREATE TABLE event_counter (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    seq   BIGINT NOT NULL
);
INSERT INTO event_counter (id, seq) VALUES (1, 0);

CREATE TABLE handlers (
    id                     TEXT PRIMARY KEY,
    name                   TEXT NOT NULL,
    description            TEXT,
    url                    TEXT NOT NULL,
    timeout_ms             BIGINT,
    spec                   TEXT NOT NULL,
    secret                 TEXT NOT NULL,
    created_at             BIGINT NOT NULL,
    updated_at             BIGINT NOT NULL,
    retired_at             BIGINT,
    previous_secret        TEXT,
    previous_secret_until  BIGINT
);

CREATE TABLE grants (
    id          TEXT PRIMARY KEY,
    agent       TEXT,
    handler     TEXT,
    permission  TEXT,
    scope       TEXT,
    tool        TEXT,
    pattern     TEXT,
    granted_by  TEXT NOT NULL,
    granted_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT,
    note        TEXT,
    CHECK ((handler IS NOT NULL AND permission IS NOT NULL AND scope IS NOT NULL AND tool IS NULL AND pattern IS NULL)
        OR (handler IS NULL AND permission IS NULL AND scope IS NULL AND tool IS NOT NULL AND pattern IS NOT NULL))
);

CREATE INDEX grants_handler ON grants (handler, permission) WHERE revoked_at IS NULL;
CREATE INDEX grants_tool ON grants (tool) WHERE revoked_at IS NULL;

CREATE TABLE grant_requests (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    handler     TEXT NOT NULL,
    permission  TEXT NOT NULL,
    scope       TEXT NOT NULL,
    reason      TEXT,
    expires     TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    deadline    BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    decided_at  BIGINT,
    decided_by  TEXT,
    deny_reason TEXT,
    grant_id    TEXT
);

CREATE INDEX grant_requests_pending ON grant_requests (deadline) WHERE status = 'pending';
CREATE INDEX grant_requests_agent ON grant_requests (agent, id);

CREATE TABLE subscriptions (
    id           TEXT PRIMARY KEY,
    url          TEXT NOT NULL,
    types        TEXT NOT NULL,
    description  TEXT,
    secret       TEXT NOT NULL,
    cursor       BIGINT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,
    subscription_id  TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    event_seq        BIGINT NOT NULL,
    event_id         TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    last_error       TEXT,
    UNIQUE (subscription_id, event_seq)
);

CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, event_seq);

CREATE TABLE delivery_attempts (
    delivery_id  TEXT NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    status_code  BIGINT,
    error        TEXT,
    duration_ms  BIGINT NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);

CREATE TABLE audit_anchor (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL
);

CREATE TABLE seen_webhooks (
    id  TEXT PRIMARY KEY,
    at  BIGINT NOT NULL
);

CREATE TABLE connector_messages (
    chat         TEXT NOT NULL,
    item         TEXT NOT NULL,
    message_ref  TEXT,
    settled      BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (item, chat)
);
CREATE INDEX connector_messages_ref ON connector_messages (chat, message_ref);

CREATE TABLE connector_outbox (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat             TEXT NOT NULL,
    item             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind = 'post' OR kind = 'edit'),
    body             TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    last_error       TEXT,
    created_at       BIGINT NOT NULL
);
CREATE INDEX connector_outbox_due ON connector_outbox (next_attempt_at);

CREATE TABLE connector_state (
    chat   TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (chat, key)
);

CREATE TABLE connector_seen (
    chat         TEXT NOT NULL,
    interaction  TEXT NOT NULL,
    seen_at      BIGINT NOT NULL,
    PRIMARY KEY (chat, interaction)
);
