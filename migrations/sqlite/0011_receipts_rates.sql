-- The daemon's receipt signing key (Ed25519 seed, hex): made once by the
-- first daemon that needs it, shared by every daemon on this database.
CREATE TABLE receipt_key (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    kid        TEXT NOT NULL,
    seed       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- Actions allowed under a profile's rate limits (`max_per_hour`), one row
-- each, per agent and counter key (`agent`, `rule:<pattern>`); rows older
-- than an hour are pruned as new ones are taken.
CREATE TABLE rate_events (
    agent TEXT NOT NULL,
    key   TEXT NOT NULL,
    at    INTEGER NOT NULL
);
CREATE INDEX rate_events_by_key ON rate_events (agent, key, at);
