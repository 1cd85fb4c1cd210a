-- The event log without a hot row (docs/ARCHITECTURE.md, "The event log on
-- Postgres"). A writing transaction no longer takes `event_counter`'s row
-- lock, which it held across its commit's WAL flush and so made every
-- writer on every node wait for the previous one's flush. It inserts its
-- events into `event_queue` under one `pos` (a plain sequence, taken by the
-- statement that appends them, after everything it read) and commits.
-- Right after its commit it runs `actiongate_sequence`: one pass at a time
-- cluster-wide (an advisory lock) moves every committed queued event into
-- `events` with the next gapless seqs, ordered by (pos, n), updates the
-- counter once and notifies the other nodes once, for the whole batch.
--
-- Why this stays gapless and never skips: passes hold the advisory lock
-- until they commit (Postgres makes a commit visible before it releases its
-- locks), so each pass reads the counter the previous one committed, and a
-- reader that sees a seq sees every lower one. A queued event is moved only
-- once its transaction committed (the pass cannot see it before), so a late
-- committer's events are numbered by the first pass after its commit,
-- after everything already published. Why it keeps causal order: a writer
-- takes its pos after what it read was committed, so whatever it depends on
-- was queued earlier (a lower pos) and is moved no later.
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
ALTER TABLE events ADD COLUMN pos BIGINT;
CREATE UNIQUE INDEX events_pos ON events (pos) WHERE pos IS NOT NULL;

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
