-- Postgres' own floor for a durable action (issue 38): the two rows a
-- decision-only action writes, an action row and its event row, with the
-- indexes the store's tables carry, in one transaction per action.
CREATE TABLE floor_actions (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    tool        TEXT NOT NULL,
    detail      TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX floor_actions_agent ON floor_actions (agent, created_at);
CREATE TABLE floor_events (
    seq        BIGSERIAL PRIMARY KEY,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    agent      TEXT,
    action_id  TEXT,
    data       TEXT NOT NULL
);
CREATE INDEX floor_events_action ON floor_events (action_id, seq);
CREATE INDEX floor_events_agent ON floor_events (agent, seq);
