-- Event delivery: outbound notification webhooks with a durable outbox, and
-- the anchor that keeps audit exports verifiable after old events are pruned.

-- An outbound notification webhook. The secret signs deliveries, so it is
-- kept as issued (it is shown to the admin once, never returned again).
CREATE TABLE subscriptions (
    id           TEXT PRIMARY KEY,
    url          TEXT NOT NULL,
    types        TEXT NOT NULL,                 -- JSON array of type filters
    description  TEXT,
    secret       TEXT NOT NULL,                 -- whsec_...
    -- Highest event seq already turned into deliveries (the outbox cursor).
    cursor       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
);

-- One event to send to one subscription, until it is delivered or given up.
CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,          -- UUIDv7
    subscription_id  TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    event_seq        INTEGER NOT NULL,
    event_id         TEXT NOT NULL,             -- the webhook-id, the same on every retry
    event_type       TEXT NOT NULL,
    payload          TEXT NOT NULL,             -- the exact body sent (JSON)
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,                   -- while pending
    created_at       INTEGER NOT NULL,
    finished_at      INTEGER,                   -- delivered or given up
    last_error       TEXT,
    UNIQUE (subscription_id, event_seq)
);

CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, event_seq);

-- Every attempt of a delivery.
CREATE TABLE delivery_attempts (
    delivery_id  TEXT NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    status_code  INTEGER,                       -- the HTTP status, when there was one
    error        TEXT,                          -- why it failed, when it did
    duration_ms  INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);

-- The audit chain's anchor: the seq and chain hash of the last pruned event,
-- from which the chain of the remaining events continues.
CREATE TABLE audit_anchor (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL,
    hash  TEXT NOT NULL
);
