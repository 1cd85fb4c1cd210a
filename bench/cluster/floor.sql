-- One pgbench transaction: the two inserts of a durable action (see
-- floor-schema.sql), committed with synchronous_commit on.
\set now random(1, 1000000000)
BEGIN;
INSERT INTO floor_actions VALUES (gen_random_uuid()::TEXT, 'bench', 'file', 'view /tmp/x', 'allowed', :now, repeat('x', 400));
INSERT INTO floor_events (id, type, at, agent, action_id, data) VALUES (gen_random_uuid()::TEXT, 'action.created', :now, 'bench', gen_random_uuid()::TEXT, repeat('y', 600));
COMMIT;
