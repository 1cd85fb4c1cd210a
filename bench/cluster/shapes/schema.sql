-- Tables for the event-log shapes of docs/perf-log.md ("Event log without a hot row"):
-- psql -f schema.sql, then pgbench -n -c 24 -T 8 -f <shape>.sql, emptying the tables between runs.
CREATE TABLE actions (id TEXT PRIMARY KEY, agent TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE events (seq BIGINT PRIMARY KEY, id TEXT NOT NULL, type TEXT NOT NULL, at BIGINT NOT NULL, agent TEXT, action_id TEXT, grant_id TEXT, data TEXT NOT NULL, pos BIGINT);
CREATE UNIQUE INDEX events_pos ON events (pos) WHERE pos IS NOT NULL;
CREATE INDEX ON events (action_id, seq); CREATE INDEX ON events (agent, seq);
CREATE TABLE event_counter (id BIGINT PRIMARY KEY, seq BIGINT NOT NULL);
INSERT INTO event_counter VALUES (1, 0);
CREATE SEQUENCE plain_seq;
CREATE SEQUENCE event_pos;

CREATE TABLE event_queue (
    pos        BIGINT NOT NULL,
    n          BIGINT NOT NULL,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    agent      TEXT,
    action_id  TEXT,
    grant_id   TEXT,
    data       TEXT NOT NULL,
    PRIMARY KEY (pos, n)
);

-- The pos of a transaction's first event, so its writer finds the seqs a
-- pass (maybe another node's) gave them. The rest of its events follow it.

-- One sequencing pass. `mine`: the pos of the caller's own committed
-- events (NULL: any queued events, e.g. a writer's that never ran its
-- pass). Answers the seq its first event got (NULL without `mine`) and
-- the newest seq, which the caller publishes up to before it answers.
CREATE FUNCTION actiongate_sequence(mine BIGINT, node TEXT, OUT first BIGINT, OUT upto BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    last  BIGINT;
    moved BIGINT;
BEGIN
    IF mine IS NOT NULL THEN
        SELECT seq INTO first FROM events WHERE pos = mine;
        IF first IS NOT NULL THEN
            SELECT seq INTO upto FROM event_counter WHERE id = 1;
            RETURN;
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM event_queue) THEN
        SELECT seq INTO upto FROM event_counter WHERE id = 1;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('actiongate.events'));
    -- The pass before this one may have numbered the caller's events: then
    -- leave what was queued since to its own writers' passes, so each pass
    -- that flushes carries every event its waiters queued meanwhile.
    IF mine IS NOT NULL THEN
        SELECT seq INTO first FROM events WHERE pos = mine;
        IF first IS NOT NULL THEN
            SELECT seq INTO upto FROM event_counter WHERE id = 1;
            RETURN;
        END IF;
    END IF;
    -- The counter's row lock as well, once per pass: a daemon of the
    -- version before this one (a rolling upgrade) appends under it.
    SELECT seq INTO last FROM event_counter WHERE id = 1 FOR UPDATE;
    WITH q AS (DELETE FROM event_queue RETURNING *),
         ins AS (
             INSERT INTO events (seq, id, type, at, agent, action_id, grant_id, data, pos)
             SELECT last + row_number() OVER (ORDER BY q.pos, q.n), q.id, q.type, q.at,
                    q.agent, q.action_id, q.grant_id, q.data,
                    CASE WHEN q.n = 1 THEN q.pos END
             FROM q
             RETURNING 1
         )
    SELECT COUNT(*) INTO moved FROM ins;
    upto := last + moved;
    IF moved > 0 THEN
        UPDATE event_counter SET seq = upto WHERE id = 1;
        PERFORM pg_notify('actiongate_events', upto::TEXT || ' ' || node);
    END IF;
    IF mine IS NOT NULL THEN
        SELECT seq INTO first FROM events WHERE pos = mine;
    END IF;
END
$$;
