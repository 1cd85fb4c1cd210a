-- The daemon's receipt signing key (Ed25519 seed, hex): made once by the
-- first daemon that needs it, shared by every daemon on this database.
CREATE TABLE receipt_key (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    kid        TEXT NOT NULL,
    seed       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
