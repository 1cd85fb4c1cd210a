-- Handlers (out-of-process executors and the actions they declare), grants
-- (standing permissions given by humans) and grant requests (an agent asking
-- a human for one).

CREATE TABLE handlers (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT,
    url         TEXT NOT NULL,
    timeout_ms  INTEGER,
    -- JSON: {permissions: [...], actions: [...]} as registered
    spec        TEXT NOT NULL,
    -- whsec_… shared secret that signs webhooks (HMAC needs the secret itself)
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    retired_at  INTEGER
);

ALTER TABLE actions ADD COLUMN handler TEXT;
ALTER TABLE actions ADD COLUMN action_name TEXT;
-- Params as sent (for the executor) and as shown (sensitive values masked).
ALTER TABLE actions ADD COLUMN params TEXT;
ALTER TABLE actions ADD COLUMN params_view TEXT;
ALTER TABLE actions ADD COLUMN permission TEXT;
ALTER TABLE actions ADD COLUMN scope TEXT;
ALTER TABLE actions ADD COLUMN display TEXT;

CREATE INDEX actions_handler ON actions (handler, id) WHERE handler IS NOT NULL;

CREATE TABLE grants (
    id          TEXT PRIMARY KEY,
    agent       TEXT,                 -- NULL: any agent
    handler     TEXT,                 -- permission grants
    permission  TEXT,
    scope       TEXT,                 -- JSON object
    tool        TEXT,                 -- decision-only grants
    pattern     TEXT,
    granted_by  TEXT NOT NULL,
    granted_at  INTEGER NOT NULL,
    expires_at  INTEGER,              -- NULL: indefinite
    revoked_at  INTEGER,
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
    scope       TEXT NOT NULL,        -- JSON object
    reason      TEXT,
    expires     TEXT,                 -- the expiry asked for, in the grammar
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    deadline    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    decided_at  INTEGER,
    decided_by  TEXT,
    deny_reason TEXT,
    grant_id    TEXT
);

CREATE INDEX grant_requests_pending ON grant_requests (deadline) WHERE status = 'pending';
CREATE INDEX grant_requests_agent ON grant_requests (agent, id);
