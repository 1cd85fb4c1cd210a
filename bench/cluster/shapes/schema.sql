-- Tables for the event-log shapes of docs/perf-log.md ("Event log without a hot row"):
--   psql -f schema.sql -f ../../../migrations/postgres/0010_event_queue.sql
-- (the migration adds the queue, `events.pos` and the sequencing pass, as the
-- daemon has them), then pgbench -n -c 24 -T 8 -f <shape>.sql, emptying the
-- tables between runs.
CREATE TABLE actions (id TEXT PRIMARY KEY, agent TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE events (seq BIGINT PRIMARY KEY, id TEXT NOT NULL, type TEXT NOT NULL, at BIGINT NOT NULL, agent TEXT, action_id TEXT, grant_id TEXT, data TEXT NOT NULL);
CREATE INDEX ON events (action_id, seq); CREATE INDEX ON events (agent, seq);
CREATE TABLE event_counter (id BIGINT PRIMARY KEY, seq BIGINT NOT NULL);
INSERT INTO event_counter VALUES (1, 0);
CREATE SEQUENCE plain_seq;
