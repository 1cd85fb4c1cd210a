BEGIN;
INSERT INTO actions VALUES (gen_random_uuid()::TEXT, 'bench', repeat('x', 400));
WITH c AS (UPDATE event_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq)
INSERT INTO events (seq, id, type, at, agent, action_id, data) SELECT c.seq, gen_random_uuid()::TEXT, 'action.created', 1, 'bench', 'a', repeat('y', 600) FROM c;
SELECT pg_notify('actiongate_events', 'x');
COMMIT;
